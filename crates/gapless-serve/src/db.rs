//! The server's SQLite database: profiles, runs, calibrations. Migrations are the SQL files
//! in `migrations/`, applied in order by `PRAGMA user_version`; every write is one
//! transaction. Opening the database marks the runs a previous server left `running` as
//! `interrupted`, keeping what their last checkpoint stored.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::ServeError;

/// The migrations, in order; version k is the first k applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_experiments.sql"),
];

/// The tables of jobs (runs, experiments): they share status, checkpoint and end.
#[derive(Debug, Clone, Copy)]
pub enum Jobs {
    Runs,
    Experiments,
}

impl Jobs {
    fn table(self) -> &'static str {
        match self {
            Jobs::Runs => "runs",
            Jobs::Experiments => "experiments",
        }
    }
}

/// Unix time in ns.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// A saved profile.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ProfileRow {
    pub name: String,
    pub toml: String,
    pub created_ns: i64,
    pub updated_ns: i64,
    pub valid: bool,
    pub error: Option<String>,
}

pub struct Db {
    conn: Connection,
}

impl Db {
    /// Opens (or creates) the database at `path`, migrates it, and marks unfinished runs.
    pub fn open(path: &Path) -> Result<Db, ServeError> {
        let conn = Connection::open(path).map_err(|e| ServeError::db(path, e))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .and_then(|_| conn.pragma_update(None, "foreign_keys", "ON"))
            .map_err(|e| ServeError::db(path, e))?;
        let mut db = Db { conn };
        db.migrate().map_err(|e| ServeError::db(path, e))?;
        for t in [Jobs::Runs, Jobs::Experiments] {
            let sql = format!(
                "UPDATE {} SET status = 'interrupted', ended_ns = COALESCE(ended_ns, ?1) WHERE status = 'running'",
                t.table()
            );
            db.conn
                .execute(&sql, params![now_ns()])
                .map_err(|e| ServeError::db(path, e))?;
        }
        Ok(db)
    }

    fn migrate(&mut self) -> rusqlite::Result<()> {
        let have: usize = self.conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        for (k, sql) in MIGRATIONS.iter().enumerate().skip(have) {
            let tx = self.conn.transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", k + 1)?;
            tx.commit()?;
        }
        Ok(())
    }

    /// Every profile, by name.
    pub fn profiles(&self) -> rusqlite::Result<Vec<ProfileRow>> {
        let mut st = self
            .conn
            .prepare("SELECT name, toml, created_ns, updated_ns, valid, error FROM profiles ORDER BY name")?;
        let rows = st.query_map([], row_to_profile)?;
        rows.collect()
    }

    pub fn profile(&self, name: &str) -> rusqlite::Result<Option<ProfileRow>> {
        self.conn
            .query_row(
                "SELECT name, toml, created_ns, updated_ns, valid, error FROM profiles WHERE name = ?1",
                params![name],
                row_to_profile,
            )
            .optional()
    }

    /// Saves a profile (created, or replaced keeping its creation time).
    pub fn put_profile(&mut self, name: &str, toml: &str, error: Option<&str>) -> rusqlite::Result<ProfileRow> {
        let now = now_ns();
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO profiles (name, toml, created_ns, updated_ns, valid, error) VALUES (?1, ?2, ?3, ?3, ?4, ?5)
             ON CONFLICT(name) DO UPDATE SET toml = ?2, updated_ns = ?3, valid = ?4, error = ?5",
            params![name, toml, now, error.is_none(), error],
        )?;
        tx.commit()?;
        Ok(self.profile(name)?.expect("just written"))
    }

    /// Deletes a profile; false if there was none.
    pub fn delete_profile(&mut self, name: &str) -> rusqlite::Result<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM profiles WHERE name = ?1", params![name])?
            > 0)
    }
}

/// A run as stored. `result` is the result JSON once it ended, or the last checkpoint
/// (`{"checkpoint": snapshot}`) while running or after an interruption.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub profile: String,
    pub toml: String,
    pub target: serde_json::Value,
    pub started_ns: i64,
    pub ended_ns: Option<i64>,
    pub status: String,
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
}

const RUN_COLS: &str = "id, profile, toml, target, started_ns, ended_ns, status, result, error";

impl Db {
    /// Records a run that starts now; returns its id.
    pub fn insert_run(&mut self, profile: &str, toml: &str, target: &serde_json::Value) -> rusqlite::Result<i64> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO runs (profile, toml, target, started_ns, status) VALUES (?1, ?2, ?3, ?4, 'running')",
            params![profile, toml, target.to_string(), now_ns()],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// Stores what a running run or experiment has measured so far.
    pub fn checkpoint(&mut self, t: Jobs, id: i64, so_far: &serde_json::Value) -> rusqlite::Result<()> {
        let doc = serde_json::json!({ "checkpoint": so_far });
        let sql = format!(
            "UPDATE {} SET result = ?2 WHERE id = ?1 AND status = 'running'",
            t.table()
        );
        self.conn.execute(&sql, params![id, doc.to_string()])?;
        Ok(())
    }

    /// Ends a run or experiment: its status, result JSON (None keeps the last checkpoint)
    /// and error.
    pub fn end(
        &mut self,
        t: Jobs,
        id: i64,
        status: &str,
        result: Option<&serde_json::Value>,
        error: Option<&str>,
    ) -> rusqlite::Result<()> {
        let tx = self.conn.transaction()?;
        let sql = format!(
            "UPDATE {} SET status = ?2, ended_ns = ?3, result = COALESCE(?4, result), error = ?5 WHERE id = ?1",
            t.table()
        );
        tx.execute(
            &sql,
            params![id, status, now_ns(), result.map(|r| r.to_string()), error],
        )?;
        tx.commit()
    }

    /// Every run, newest first.
    pub fn runs(&self) -> rusqlite::Result<Vec<RunRow>> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {RUN_COLS} FROM runs ORDER BY id DESC"))?;
        let rows = st.query_map([], row_to_run)?;
        rows.collect()
    }

    pub fn run(&self, id: i64) -> rusqlite::Result<Option<RunRow>> {
        self.conn
            .query_row(
                &format!("SELECT {RUN_COLS} FROM runs WHERE id = ?1"),
                params![id],
                row_to_run,
            )
            .optional()
    }

    /// Deletes an ended run; false if there was none.
    pub fn delete_run(&mut self, id: i64) -> rusqlite::Result<bool> {
        Ok(self
            .conn
            .execute("DELETE FROM runs WHERE id = ?1 AND status != 'running'", params![id])?
            > 0)
    }

    /// Stores a calibration (the engine's JSON); returns its id.
    pub fn insert_calibration(&mut self, json: &serde_json::Value) -> rusqlite::Result<i64> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO calibrations (created_ns, json) VALUES (?1, ?2)",
            params![now_ns(), json.to_string()],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// Every calibration, newest first: (id, created_ns, json).
    pub fn calibrations(&self) -> rusqlite::Result<Vec<(i64, i64, serde_json::Value)>> {
        let mut st = self
            .conn
            .prepare("SELECT id, created_ns, json FROM calibrations ORDER BY id DESC")?;
        let rows = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, json_col(r, 2)?.unwrap_or_default())))?;
        rows.collect()
    }
}

/// An experiment as stored (`result` as for runs).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ExperimentRow {
    pub id: i64,
    pub name: String,
    pub toml: String,
    pub started_ns: i64,
    pub ended_ns: Option<i64>,
    pub status: String,
    pub result: Option<serde_json::Value>,
    pub error: Option<String>,
}

const EXP_COLS: &str = "id, name, toml, started_ns, ended_ns, status, result, error";

impl Db {
    /// Records an experiment that starts now; returns its id.
    pub fn insert_experiment(&mut self, name: &str, toml: &str) -> rusqlite::Result<i64> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO experiments (name, toml, started_ns, status) VALUES (?1, ?2, ?3, 'running')",
            params![name, toml, now_ns()],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// Every experiment, newest first.
    pub fn experiments(&self) -> rusqlite::Result<Vec<ExperimentRow>> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {EXP_COLS} FROM experiments ORDER BY id DESC"))?;
        let rows = st.query_map([], row_to_experiment)?;
        rows.collect()
    }

    pub fn experiment(&self, id: i64) -> rusqlite::Result<Option<ExperimentRow>> {
        self.conn
            .query_row(
                &format!("SELECT {EXP_COLS} FROM experiments WHERE id = ?1"),
                params![id],
                row_to_experiment,
            )
            .optional()
    }
}

fn row_to_experiment(r: &rusqlite::Row<'_>) -> rusqlite::Result<ExperimentRow> {
    Ok(ExperimentRow {
        id: r.get(0)?,
        name: r.get(1)?,
        toml: r.get(2)?,
        started_ns: r.get(3)?,
        ended_ns: r.get(4)?,
        status: r.get(5)?,
        result: json_col(r, 6)?,
        error: r.get(7)?,
    })
}

/// A JSON text column; a column that does not parse reads as a string (never lost).
fn json_col(r: &rusqlite::Row<'_>, i: usize) -> rusqlite::Result<Option<serde_json::Value>> {
    let t: Option<String> = r.get(i)?;
    Ok(t.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t))))
}

fn row_to_run(r: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    Ok(RunRow {
        id: r.get(0)?,
        profile: r.get(1)?,
        toml: r.get(2)?,
        target: json_col(r, 3)?.unwrap_or_default(),
        started_ns: r.get(4)?,
        ended_ns: r.get(5)?,
        status: r.get(6)?,
        result: json_col(r, 7)?,
        error: r.get(8)?,
    })
}

fn row_to_profile(r: &rusqlite::Row<'_>) -> rusqlite::Result<ProfileRow> {
    Ok(ProfileRow {
        name: r.get(0)?,
        toml: r.get(1)?,
        created_ns: r.get(2)?,
        updated_ns: r.get(3)?,
        valid: r.get(4)?,
        error: r.get(5)?,
    })
}
