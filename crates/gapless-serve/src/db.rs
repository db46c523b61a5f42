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
const MIGRATIONS: &[&str] = &[include_str!("../migrations/0001_init.sql")];

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
        db.conn
            .execute(
                "UPDATE runs SET status = 'interrupted', ended_ns = COALESCE(ended_ns, ?1) WHERE status = 'running'",
                params![now_ns()],
            )
            .map_err(|e| ServeError::db(path, e))?;
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
