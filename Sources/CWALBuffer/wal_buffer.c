// A VFS that buffers appends to the write-ahead log until the next sync (see wal_buffer.h).
//
// Durability is unchanged: SQLite counts a transaction committed only after xSync on the log has
// returned, and xSync writes the buffer before it syncs. Anything that could observe the file
// (a read, its size, a truncation, a write elsewhere, closing) writes the buffer first, so the
// file always looks exactly as if every write had gone straight through.
//
// Other connections read the log too, at the frames the wal-index lists; SQLite publishes a
// commit there after its sync, so they never look for bytes still in the buffer — provided every
// commit syncs (`synchronous = FULL`, the only mode the relay's writer runs in) and nothing is
// written after that sync. SQLite writes after it only to pad the last frame out to a sector,
// which it does when the file system does not promise power-safe overwrites; on such a file this
// VFS writes straight through.
#include "wal_buffer.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    sqlite3_file base;          // methods: wal_methods
    sqlite3_file *real;         // the default VFS's file, in the same allocation after this struct
    unsigned char *buffer;      // writes not yet handed to `real`, contiguous from `start`
    sqlite3_int64 start;
    int length;
    int capacity;
    int writes_through;         // the file does not promise power-safe overwrites (see above)
} WALFile;

enum {
    // Beyond this a buffer is written out and started afresh: a grouped commit writes ~0.25 MiB,
    // a 1,000-message batch ~10 MiB, and the buffer stays allocated with its connection.
    MAX_BUFFER = 1 << 20,
    // The most the default VFS writes in one call: it masks a write's length to 17 bits (it never
    // expects more than a page), so the buffer goes out in pieces of at most this.
    MAX_WRITE = 0x1F000,
};

static sqlite3_vfs *default_vfs;
static sqlite3_vfs buffered_vfs;

static int flush(WALFile *file) {
    int rc = SQLITE_OK;
    for (int done = 0; done < file->length && rc == SQLITE_OK; done += MAX_WRITE) {
        int amount = file->length - done < MAX_WRITE ? file->length - done : MAX_WRITE;
        rc = file->real->pMethods->xWrite(file->real, file->buffer + done, amount, file->start + done);
    }
    file->length = 0;
    return rc;
}

static int wal_close(sqlite3_file *f) {
    WALFile *file = (WALFile *)f;
    int rc = flush(file);
    int closed = file->real->pMethods->xClose(file->real);
    free(file->buffer);
    file->buffer = NULL;
    file->capacity = 0;
    return rc != SQLITE_OK ? rc : closed;
}

static int wal_read(sqlite3_file *f, void *out, int amount, sqlite3_int64 offset) {
    WALFile *file = (WALFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xRead(file->real, out, amount, offset);
}

static int wal_write(sqlite3_file *f, const void *data, int amount, sqlite3_int64 offset) {
    WALFile *file = (WALFile *)f;
    if (file->writes_through) return file->real->pMethods->xWrite(file->real, data, amount, offset);
    int appends = file->length > 0 && offset == file->start + file->length;
    if (!appends || file->length + amount > MAX_BUFFER) {
        int rc = flush(file);
        if (rc != SQLITE_OK) return rc;
        if (amount > MAX_WRITE) return file->real->pMethods->xWrite(file->real, data, amount, offset);
        file->start = offset;
    }
    if (file->length + amount > file->capacity) {
        int capacity = file->capacity > 0 ? file->capacity : 64 * 1024;
        while (capacity < file->length + amount) capacity *= 2;
        unsigned char *grown = realloc(file->buffer, (size_t)capacity);
        if (grown == NULL) {
            // No memory for the buffer: write this one through (the buffer is empty or flushed).
            int rc = flush(file);
            if (rc != SQLITE_OK) return rc;
            return file->real->pMethods->xWrite(file->real, data, amount, offset);
        }
        file->buffer = grown;
        file->capacity = capacity;
    }
    memcpy(file->buffer + file->length, data, (size_t)amount);
    file->length += amount;
    return SQLITE_OK;
}

static int wal_truncate(sqlite3_file *f, sqlite3_int64 size) {
    WALFile *file = (WALFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xTruncate(file->real, size);
}

static int wal_sync(sqlite3_file *f, int flags) {
    WALFile *file = (WALFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xSync(file->real, flags);
}

static int wal_file_size(sqlite3_file *f, sqlite3_int64 *size) {
    WALFile *file = (WALFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xFileSize(file->real, size);
}

static int wal_lock(sqlite3_file *f, int level) {
    WALFile *file = (WALFile *)f;
    return file->real->pMethods->xLock(file->real, level);
}

static int wal_unlock(sqlite3_file *f, int level) {
    WALFile *file = (WALFile *)f;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int wal_check_reserved_lock(sqlite3_file *f, int *reserved) {
    WALFile *file = (WALFile *)f;
    return file->real->pMethods->xCheckReservedLock(file->real, reserved);
}

static int wal_file_control(sqlite3_file *f, int op, void *argument) {
    WALFile *file = (WALFile *)f;
    int rc = flush(file);
    if (rc != SQLITE_OK) return rc;
    return file->real->pMethods->xFileControl(file->real, op, argument);
}

static int wal_sector_size(sqlite3_file *f) {
    WALFile *file = (WALFile *)f;
    return file->real->pMethods->xSectorSize(file->real);
}

static int wal_device_characteristics(sqlite3_file *f) {
    WALFile *file = (WALFile *)f;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

// Version 1: SQLite maps shared memory and pages through the database file, never the log.
static const sqlite3_io_methods wal_methods = {
    1,
    wal_close,
    wal_read,
    wal_write,
    wal_truncate,
    wal_sync,
    wal_file_size,
    wal_lock,
    wal_unlock,
    wal_check_reserved_lock,
    wal_file_control,
    wal_sector_size,
    wal_device_characteristics,
    NULL, NULL, NULL, NULL, NULL, NULL,
};

static int buffered_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out_flags) {
    (void)vfs;
    if (!(flags & SQLITE_OPEN_WAL)) {
        // Any other file is the default VFS's own, in place (szOsFile covers it).
        return default_vfs->xOpen(default_vfs, name, f, flags, out_flags);
    }
    WALFile *file = (WALFile *)f;
    memset(file, 0, sizeof(WALFile));
    file->real = (sqlite3_file *)(file + 1);
    int rc = default_vfs->xOpen(default_vfs, name, file->real, flags, out_flags);
    // (On failure base.pMethods stays NULL, and SQLite does not call xClose.)
    if (rc != SQLITE_OK) return rc;
    file->base.pMethods = &wal_methods;
    int characteristics = file->real->pMethods->xDeviceCharacteristics(file->real);
    file->writes_through = !(characteristics & SQLITE_IOCAP_POWERSAFE_OVERWRITE);
    return SQLITE_OK;
}

static int buffered_delete(sqlite3_vfs *v, const char *name, int sync_dir) {
    (void)v;
    return default_vfs->xDelete(default_vfs, name, sync_dir);
}
static int buffered_access(sqlite3_vfs *v, const char *name, int flags, int *result) {
    (void)v;
    return default_vfs->xAccess(default_vfs, name, flags, result);
}
static int buffered_full_pathname(sqlite3_vfs *v, const char *name, int size, char *out) {
    (void)v;
    return default_vfs->xFullPathname(default_vfs, name, size, out);
}
static void *buffered_dl_open(sqlite3_vfs *v, const char *name) {
    (void)v;
    return default_vfs->xDlOpen(default_vfs, name);
}
static void buffered_dl_error(sqlite3_vfs *v, int size, char *out) {
    (void)v;
    default_vfs->xDlError(default_vfs, size, out);
}
static void (*buffered_dl_sym(sqlite3_vfs *v, void *handle, const char *symbol))(void) {
    (void)v;
    return default_vfs->xDlSym(default_vfs, handle, symbol);
}
static void buffered_dl_close(sqlite3_vfs *v, void *handle) {
    (void)v;
    default_vfs->xDlClose(default_vfs, handle);
}
static int buffered_randomness(sqlite3_vfs *v, int size, char *out) {
    (void)v;
    return default_vfs->xRandomness(default_vfs, size, out);
}
static int buffered_sleep(sqlite3_vfs *v, int microseconds) {
    (void)v;
    return default_vfs->xSleep(default_vfs, microseconds);
}
static int buffered_current_time(sqlite3_vfs *v, double *now) {
    (void)v;
    return default_vfs->xCurrentTime(default_vfs, now);
}
static int buffered_get_last_error(sqlite3_vfs *v, int size, char *out) {
    (void)v;
    return default_vfs->xGetLastError(default_vfs, size, out);
}
static int buffered_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *now) {
    (void)v;
    return default_vfs->xCurrentTimeInt64(default_vfs, now);
}

static int registered = SQLITE_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void register_once(void) {
    default_vfs = sqlite3_vfs_find(NULL);
    if (default_vfs == NULL || default_vfs->iVersion < 2) return;
    // Room for either: the default VFS's own file in place, or a WALFile followed by one.
    int size = (int)sizeof(WALFile) + default_vfs->szOsFile;
    buffered_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = size,
        .mxPathname = default_vfs->mxPathname,
        .zName = PR_WAL_BUFFER_VFS,
        .xOpen = buffered_open,
        .xDelete = buffered_delete,
        .xAccess = buffered_access,
        .xFullPathname = buffered_full_pathname,
        .xDlOpen = buffered_dl_open,
        .xDlError = buffered_dl_error,
        .xDlSym = buffered_dl_sym,
        .xDlClose = buffered_dl_close,
        .xRandomness = buffered_randomness,
        .xSleep = buffered_sleep,
        .xCurrentTime = buffered_current_time,
        .xGetLastError = buffered_get_last_error,
        .xCurrentTimeInt64 = buffered_current_time_int64,
    };
    registered = sqlite3_vfs_register(&buffered_vfs, 0);
}

int pr_wal_buffer_register(void) {
    pthread_once(&once, register_once);
    return registered;
}
