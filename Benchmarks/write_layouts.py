#!/usr/bin/env python3
"""Bytes each accepted message costs the disk, per storage layout (standard library only).

  python3 Benchmarks/write_layouts.py [MESSAGES] [GROUP ...]

Replays single-recipient messages (200-byte payload, recipients rotating over 1,000 users, ids
as Benchmarks/post.lua makes them) through the system's SQLite, grouped into transactions of
GROUP messages with one fsync each (`synchronous = FULL`, WAL, `wal_autocheckpoint = 4000`: the
relay's settings), and prints what this process wrote to disk per message (`/proc/self/io`
`write_bytes`: the log, its checkpoints and the close). The layouts:

  today       the shipped schema (read from Sources/RelayStore/Migrations.swift) written as
              `SQLStore.accept` writes it: head read and update, inbox entry, message row
  today-1k    the same with 1 KiB pages instead of 4 KiB
  log-table   one append-ordered SQLite table, a row per message, no secondary index
  log-file    a file of its own: each message's record appended, `fdatasync` per group

CPU figures include this interpreter's own cost: compare them with each other, not with the
relay's. What the numbers decide is written in BENCHMARKS.md ("Where a message's bytes and
microseconds go").
"""

import os
import re
import sqlite3
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USERS = 1000
PAYLOAD = '{"text":"' + "x" * 189 + '"}'


def written():
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("write_bytes"):
                return int(line.split()[1])
    return 0


def migrations():
    with open(os.path.join(ROOT, "Sources/RelayStore/Migrations.swift")) as f:
        return re.findall(r'"""\n(.*?)"""', f.read(), re.S)


def message(i):
    return f"bench{(i * 7) % USERS + 1}", f"b1765100000m-{i % 2 + 1}-{i // 2}"


def sqlite_layout(path, page_size, schema):
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size = {page_size}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("PRAGMA wal_autocheckpoint = 4000")
    for step in schema:
        db.executescript(step)
    return db


def in_groups(db, n, group, write):
    """Calls `write(db, i)` for i in 1...n, `group` to a transaction; bytes written and CPU."""
    start, cpu = written(), time.process_time()
    i = 0
    while i < n:
        db.execute("BEGIN IMMEDIATE")
        for _ in range(group):
            i += 1
            write(db, i)
        db.execute("COMMIT")
    db.close()
    return written() - start, time.process_time() - cpu


def run_today(path, n, group, page_size=4096):
    fingerprint = os.urandom(32)

    def accept(db, i):
        user, mid = message(i)
        now = 1_765_000_000_000 + i
        db.execute("SELECT fingerprint, recipients, expires_at FROM messages WHERE id = ?", (mid,)).fetchall()
        row = db.execute("SELECT head_seq FROM inboxes WHERE user_id = ?", (user,)).fetchone()
        if row:
            seq = row[0] + 1
            db.execute("UPDATE inboxes SET head_seq = ? WHERE user_id = ?", (seq, user))
        else:
            seq = 1
            db.execute("INSERT INTO inboxes(user_id, epoch, head_seq, created_at) VALUES (?, ?, 1, ?)",
                       (user, "e" * 16, now))
        db.execute("INSERT INTO inbox_entries(user_id, seq, message_id, created_at, expires_at, state) "
                   "VALUES (?, ?, ?, ?, ?, 'stored')", (user, seq, mid, now, now + 86_400_000))
        db.execute("INSERT INTO messages(id, fingerprint, conversation_id, sender_id, payload, push, priority, "
                   "collapse_key, created_at, expires_at, recipients) VALUES (?, ?, NULL, NULL, ?, NULL, "
                   "'normal', NULL, ?, ?, ?)",
                   (mid, fingerprint, PAYLOAD, now, now + 86_400_000, f'[["{user}",{seq},"stored"]]'))

    return in_groups(sqlite_layout(path, page_size, migrations()), n, group, accept)


def record(i):
    user, mid = message(i)
    return f'{mid}\t{user}\t{i}\t{1_765_000_000_000 + i}\t{PAYLOAD}\n'.encode()


def run_log_table(path, n, group):
    db = sqlite_layout(path, 4096, ["CREATE TABLE log(position INTEGER PRIMARY KEY, record BLOB NOT NULL);"])
    return in_groups(db, n, group, lambda db, i: db.execute("INSERT INTO log(record) VALUES (?)", (record(i),)))


def run_log_file(path, n, group):
    start, cpu = written(), time.process_time()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    i = 0
    while i < n:
        batch = b"".join(record(i + k + 1) for k in range(group))
        i += group
        os.write(fd, batch)
        os.fdatasync(fd)
    os.close(fd)
    return written() - start, time.process_time() - cpu


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50_000
    groups = [int(g) for g in sys.argv[2:]] or [4, 16, 64]
    body = len(record(1))
    print(f"{n} messages, a {len(PAYLOAD)}-byte payload ({body}-byte log record), {USERS} users")
    print(f"{'layout':<10} {'group':>5} {'bytes/msg':>10} {'x record':>9} {'CPU us/msg':>11} {'file/msg':>9}")
    layouts = [("today", lambda p, g: run_today(p, n, g)), ("today-1k", lambda p, g: run_today(p, n, g, 1024)),
               ("log-table", lambda p, g: run_log_table(p, n, g)), ("log-file", lambda p, g: run_log_file(p, n, g))]
    for name, run in layouts:
        for group in groups:
            with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as directory:
                path = os.path.join(directory, "layout.db")
                disk, cpu = run(path, group)
                size = os.path.getsize(path)
                print(f"{name:<10} {group:>5} {disk / n:>10,.0f} {disk / n / body:>9.1f} {cpu * 1e6 / n:>11.1f} "
                      f"{size / n:>9,.0f}")


if __name__ == "__main__":
    main()
