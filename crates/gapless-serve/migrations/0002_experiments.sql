-- gapless serve's database, version 2: experiments (RFC 2544, sweeps, repeats) run from the
-- dashboard. `result` is the experiment's result file once it ended, or
-- {"checkpoint": {"trials": [...]}} with the trials judged so far.
CREATE TABLE experiments (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    toml        TEXT NOT NULL,
    started_ns  INTEGER NOT NULL,
    ended_ns    INTEGER,
    status      TEXT NOT NULL,          -- running | finished | failed | stopped | interrupted
    result      TEXT,
    error       TEXT
);
