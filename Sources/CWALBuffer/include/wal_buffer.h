#ifndef PUSHRELAY_WAL_BUFFER_H
#define PUSHRELAY_WAL_BUFFER_H

/// The name of the SQLite VFS registered by `pr_wal_buffer_register`.
#define PR_WAL_BUFFER_VFS "pushrelay-wal"

/// Registers (once) a VFS over the default one that gathers the writes a transaction makes to
/// its write-ahead log and hands them to the file system in one `pwrite` at the commit's sync,
/// instead of two per page (a frame header and the page). Every other file, and every other
/// operation, goes to the default VFS unchanged. Returns an SQLite result code.
int pr_wal_buffer_register(void);

#endif
