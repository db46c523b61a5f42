-- gapless serve's database, version 1. Times are Unix nanoseconds.
CREATE TABLE profiles (
    name        TEXT PRIMARY KEY,
    toml        TEXT NOT NULL,
    created_ns  INTEGER NOT NULL,
    updated_ns  INTEGER NOT NULL,
    -- The result of compiling it: 'valid', or the error (path, problem, fix) as text.
    valid       INTEGER NOT NULL,
    error       TEXT
);
CREATE TABLE runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    profile     TEXT NOT NULL,          -- the profile's name when it ran
    toml        TEXT NOT NULL,          -- the profile as it ran (a snapshot)
    target      TEXT NOT NULL,          -- where it sent, as JSON (the run request)
    started_ns  INTEGER NOT NULL,
    ended_ns    INTEGER,
    -- running | finished | failed | stopped | interrupted (the server ended without finishing it)
    status      TEXT NOT NULL,
    result      TEXT,                   -- the result JSON, or the last checkpoint's snapshot
    error       TEXT
);
CREATE TABLE calibrations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    created_ns  INTEGER NOT NULL,
    json        TEXT NOT NULL
);
