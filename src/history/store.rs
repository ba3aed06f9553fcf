//! The results store: a SQLite file (the default, one machine) or a PostgreSQL database (a
//! team's, `postgres://user@host/db`, its password from `PGPASSWORD`), one schema in both.
//!
//! Each point is one row: the columns the store is searched and kept unique by (the bundle's
//! content hash, its series, when it ran, where it lies), and the point itself as JSON. Its
//! schema is versioned in `goodput_history_meta`; a store from a newer goodput is refused, an
//! older one migrated in a locked transaction. Every add is one transaction: a failed add
//! changes nothing.

use std::path::{Path, PathBuf};
use std::str::FromStr as _;

use anyhow::{Context as _, anyhow, bail};
use rusqlite::OptionalExtension as _;

use super::Point;

/// The schema this goodput writes; migrations bring older stores to it.
pub const SCHEMA_VERSION: u32 = 1;

/// The default store: beside the default bundles (`runs/`).
pub const DEFAULT: &str = "runs/history.sqlite";

/// Each schema version's statements, from an empty store: `{id}` is the dialect's key column.
const MIGRATIONS: [&str; 1] = ["CREATE TABLE goodput_history_points (
        id {id},
        bundle_id TEXT NOT NULL UNIQUE,
        series TEXT NOT NULL,
        started_utc TEXT NOT NULL,
        added_utc TEXT NOT NULL,
        bundle_path TEXT NOT NULL,
        point TEXT NOT NULL
    );
    CREATE INDEX goodput_history_by_series ON goodput_history_points (series, started_utc, id)"];

/// What `add` did with a point.
#[derive(Debug, Clone, PartialEq)]
pub enum Added {
    New(i64),
    /// Already stored (the same bundle, by content): nothing changed.
    Already {
        id: i64,
        at: String,
    },
    /// Already stored, but its bundle is no longer where the store said: the pointer now
    /// names where it lies.
    Moved {
        id: i64,
        from: String,
    },
}

pub enum Store {
    Sqlite {
        db: rusqlite::Connection,
        path: PathBuf,
    },
    Postgres {
        db: tokio_postgres::Client,
        /// The URL as shown (no password: it is refused there).
        url: String,
    },
}

impl std::fmt::Display for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Sqlite { path, .. } => write!(f, "{}", path.display()),
            Store::Postgres { url, .. } => f.write_str(url),
        }
    }
}

/// How long connecting to a PostgreSQL store may take, its startup exchange included.
const PG_CONNECT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long one operation on a PostgreSQL store (a migration, an add, a read) may take: each
/// is a few statements on a few rows; a server that stops answering is named, never waited
/// for without end.
const PG_OPERATION: std::time::Duration = std::time::Duration::from_secs(30);

/// `op` on a PostgreSQL store, bounded by [`PG_OPERATION`] (SQLite's waits are bounded by its
/// busy timeout).
async fn bounded<T>(
    postgres: Option<String>,
    op: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    let Some(url) = postgres else {
        return op.await;
    };
    tokio::time::timeout(PG_OPERATION, op).await.map_err(|_| {
        anyhow!(
            "history store {url}: no answer within {} s",
            PG_OPERATION.as_secs()
        )
    })?
}

fn is_postgres(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

impl Store {
    /// Opens the store at `location` (a file path, or a `postgres://` URL), creating its
    /// tables when `create` (else a store that holds no history yet is an error).
    pub async fn open(location: &str, create: bool) -> anyhow::Result<Store> {
        let mut store = if is_postgres(location) {
            postgres(location).await?
        } else {
            sqlite(Path::new(location), create)?
        };
        let name = store.to_string();
        bounded(store.postgres(), store.migrate(create))
            .await
            .with_context(|| format!("history store {name}"))?;
        Ok(store)
    }

    /// The URL as shown, when the store is PostgreSQL's.
    fn postgres(&self) -> Option<String> {
        match self {
            Store::Sqlite { .. } => None,
            Store::Postgres { url, .. } => Some(url.clone()),
        }
    }

    /// Brings the store to [`SCHEMA_VERSION`] under a lock (two processes opening one new
    /// store at once create it once).
    async fn migrate(&mut self, create: bool) -> anyhow::Result<()> {
        match self {
            Store::Sqlite { db, path } => migrate_sqlite(db, path, create).map_err(|e| {
                match e
                    .downcast_ref::<rusqlite::Error>()
                    .and_then(|e| e.sqlite_error_code())
                {
                    Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly) => {
                        anyhow!(
                            "cannot write in {} (permission denied or a read-only file system)",
                            path.parent()
                                .filter(|d| !d.as_os_str().is_empty())
                                .unwrap_or(Path::new("."))
                                .display()
                        )
                    }
                    _ => e,
                }
            }),
            Store::Postgres { db, .. } => migrate_postgres(db, create).await,
        }
    }

    /// Adds the points in one transaction: all of them, or (on any error) none.
    pub async fn add(&mut self, points: &[Point]) -> anyhow::Result<Vec<Added>> {
        bounded(self.postgres(), self.add_unbounded(points)).await
    }

    async fn add_unbounded(&mut self, points: &[Point]) -> anyhow::Result<Vec<Added>> {
        let now = jiff::Timestamp::now().to_string();
        let mut out = Vec::new();
        match self {
            Store::Sqlite { db, .. } => {
                let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
                for p in points {
                    let known: Option<(i64, String)> = tx
                        .query_row(
                            "SELECT id, bundle_path FROM goodput_history_points WHERE bundle_id = ?1",
                            [&p.bundle_id],
                            |r| Ok((r.get(0)?, r.get(1)?)),
                        )
                        .optional()?;
                    let json = serde_json::to_string(p)?;
                    out.push(match known {
                        Some((id, at)) => match moved(&at, &p.bundle) {
                            false => Added::Already { id, at },
                            true => {
                                tx.execute(
                                    "UPDATE goodput_history_points SET bundle_path = ?1, point = ?2 WHERE id = ?3",
                                    rusqlite::params![p.bundle, json, id],
                                )?;
                                Added::Moved { id, from: at }
                            }
                        },
                        None => Added::New(tx.query_row(
                            "INSERT INTO goodput_history_points (bundle_id, series, started_utc, added_utc, bundle_path, point)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
                            rusqlite::params![p.bundle_id, p.series, p.started_utc, now, p.bundle, json],
                            |r| r.get(0),
                        )?),
                    });
                }
                tx.commit()?;
            }
            Store::Postgres { db, .. } => {
                let tx = db.transaction().await?;
                for p in points {
                    let json = serde_json::to_string(p)?;
                    // Two processes adding one bundle at once: the second's insert does nothing.
                    let inserted = tx
                        .query_opt(
                            "INSERT INTO goodput_history_points (bundle_id, series, started_utc, added_utc, bundle_path, point)
                             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (bundle_id) DO NOTHING RETURNING id",
                            &[&p.bundle_id, &p.series, &p.started_utc, &now, &p.bundle, &json],
                        )
                        .await?;
                    if let Some(r) = inserted {
                        out.push(Added::New(r.get(0)));
                        continue;
                    }
                    let r = tx
                        .query_one(
                            "SELECT id, bundle_path FROM goodput_history_points WHERE bundle_id = $1",
                            &[&p.bundle_id],
                        )
                        .await?;
                    let (id, at): (i64, String) = (r.get(0), r.get(1));
                    out.push(if moved(&at, &p.bundle) {
                        tx.execute(
                            "UPDATE goodput_history_points SET bundle_path = $1, point = $2 WHERE id = $3",
                            &[&p.bundle, &json, &id],
                        )
                        .await?;
                        Added::Moved { id, from: at }
                    } else {
                        Added::Already { id, at }
                    });
                }
                tx.commit().await?;
            }
        }
        Ok(out)
    }

    /// Every point (of one series, when given), in the order they ran.
    pub async fn points(&mut self, series: Option<&str>) -> anyhow::Result<Vec<Point>> {
        bounded(self.postgres(), self.points_unbounded(series)).await
    }

    async fn points_unbounded(&mut self, series: Option<&str>) -> anyhow::Result<Vec<Point>> {
        let name = self.to_string();
        let rows: Vec<(i64, String, String)> = match self {
            Store::Sqlite { db, .. } => {
                let mut q = db.prepare(
                    "SELECT id, bundle_path, point FROM goodput_history_points
                     WHERE ?1 IS NULL OR series = ?1 ORDER BY started_utc, id",
                )?;
                q.query_map([series], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                    .collect::<Result<_, _>>()?
            }
            Store::Postgres { db, .. } => db
                .query(
                    "SELECT id, bundle_path, point FROM goodput_history_points
                     WHERE $1::TEXT IS NULL OR series = $1 ORDER BY started_utc, id",
                    &[&series],
                )
                .await?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect(),
        };
        rows.into_iter()
            .map(|(id, path, json)| {
                let mut p: Point = serde_json::from_str(&json).map_err(|e| {
                    anyhow!("history store {name}: point {id} is not readable ({e}): the store is damaged")
                })?;
                p.id = id;
                p.bundle = path;
                Ok(p)
            })
            .collect()
    }
}

/// [`Store::migrate`] for SQLite: under an immediate transaction (the write lock).
fn migrate_sqlite(db: &mut rusqlite::Connection, path: &Path, create: bool) -> anyhow::Result<()> {
    let tx = db.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let has_meta: bool = tx.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'goodput_history_meta'",
        [],
        |r| r.get::<_, i64>(0).map(|n| n > 0),
    )?;
    let version = if has_meta {
        Some(read_version(
            tx.query_row(
                "SELECT value FROM goodput_history_meta WHERE key = 'schema_version'",
                [],
                |r| r.get::<_, String>(0),
            )
            .optional()?,
        )?)
    } else {
        let others: Vec<String> = tx
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        if !others.is_empty() {
            bail!(
                "{} is another program's SQLite database (tables {}), not a goodput history: name a new file",
                path.display(),
                others.join(", ")
            );
        }
        None
    };
    let Some(steps) = steps(version, create)? else {
        return Ok(());
    };
    if version.is_none() {
        tx.execute_batch(
            "CREATE TABLE goodput_history_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        )?;
    }
    for s in steps {
        tx.execute_batch(&s.replace("{id}", "INTEGER PRIMARY KEY AUTOINCREMENT"))?;
    }
    tx.execute(
        "INSERT INTO goodput_history_meta (key, value) VALUES ('schema_version', ?1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [SCHEMA_VERSION.to_string()],
    )?;
    tx.commit()?;
    Ok(())
}

/// [`Store::migrate`] for PostgreSQL: under a transaction-scoped advisory lock.
async fn migrate_postgres(db: &mut tokio_postgres::Client, create: bool) -> anyhow::Result<()> {
    let tx = db.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock(7366287521)", &[])
        .await?;
    let has_meta: bool = tx
        .query_one(
            "SELECT to_regclass('goodput_history_meta') IS NOT NULL",
            &[],
        )
        .await?
        .get(0);
    let version = if has_meta {
        let row = tx
            .query_opt(
                "SELECT value FROM goodput_history_meta WHERE key = 'schema_version'",
                &[],
            )
            .await?;
        Some(read_version(row.map(|r| r.get::<_, String>(0)))?)
    } else {
        None
    };
    let Some(steps) = steps(version, create)? else {
        return Ok(());
    };
    if version.is_none() {
        tx.batch_execute(
            "CREATE TABLE goodput_history_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        )
        .await?;
    }
    for s in steps {
        tx.batch_execute(&s.replace("{id}", "BIGSERIAL PRIMARY KEY"))
            .await?;
    }
    tx.execute(
        "INSERT INTO goodput_history_meta (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        &[&SCHEMA_VERSION.to_string()],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The stored pointer no longer names the bundle, and the new one does: it moved.
fn moved(stored: &str, now: &str) -> bool {
    stored != now && !Path::new(stored).join(crate::bundle::REQUESTS).is_file()
}

/// The schema version a store says it has.
fn read_version(v: Option<String>) -> anyhow::Result<u32> {
    let v = v.context("its schema version is missing: the store is damaged")?;
    v.trim()
        .parse()
        .map_err(|_| anyhow!("its schema version reads {v:?}: the store is damaged"))
}

/// The migrations from `version` to [`SCHEMA_VERSION`]; `None` when there are none to make.
fn steps(version: Option<u32>, create: bool) -> anyhow::Result<Option<Vec<String>>> {
    match version {
        Some(v) if v > SCHEMA_VERSION => bail!(
            "written by a newer goodput (history schema {v}; this goodput reads up to {SCHEMA_VERSION}): upgrade goodput to read it"
        ),
        Some(v) if v == SCHEMA_VERSION => Ok(None),
        None if !create => bail!("holds no history yet (`goodput history add BUNDLE` starts one)"),
        v => Ok(Some(
            MIGRATIONS[v.unwrap_or(0) as usize..]
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        )),
    }
}

fn sqlite(path: &Path, create: bool) -> anyhow::Result<Store> {
    if path.is_dir() {
        bail!(
            "history store {} is a directory: name a file (e.g. {}/history.sqlite)",
            path.display(),
            path.display()
        );
    }
    if !path.exists() {
        if !create {
            bail!(
                "no history store at {} (`goodput history add BUNDLE --store {}` starts one)",
                path.display(),
                path.display()
            );
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating {} for the history store", dir.display()))?;
        }
    }
    if path.exists() {
        crate::text::regular_file(path)
            .map_err(|e| anyhow!("history store {}: {e}", path.display()))?;
    }
    // SQLite's own words for a directory it may not write in are "unable to open database
    // file" (code 14): say which directory and why.
    let unwritable = |dir: &Path| {
        anyhow!(
            "history store {}: cannot write in {} (permission denied or a read-only file system); name a store in a directory you can write to",
            path.display(),
            dir.display()
        )
    };
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_owned(),
        None => PathBuf::from("."),
    };
    let db = rusqlite::Connection::open(path).map_err(|e| match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::CannotOpen) => unwritable(&dir),
        _ => anyhow!("opening the history store {}: {e}", path.display()),
    })?;
    // Another process adding at the same moment holds the write lock for milliseconds.
    db.busy_timeout(std::time::Duration::from_secs(30))?;
    // A file that is not SQLite is found on its first read: say so in words.
    db.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
        .map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => anyhow!(
                "history store {} is not an SQLite database (damaged, or another kind of file)",
                path.display()
            ),
            Some(rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly) => {
                unwritable(&dir)
            }
            _ => anyhow!("history store {}: {e}", path.display()),
        })?;
    Ok(Store::Sqlite {
        db,
        path: path.to_owned(),
    })
}

async fn postgres(location: &str) -> anyhow::Result<Store> {
    let mut config = tokio_postgres::Config::from_str(location).map_err(|e| {
        anyhow!(
            "history store {}: not a PostgreSQL URL ({e})",
            crate::secrets::url_without_password(location)
        )
    })?;
    let shown = crate::secrets::url_without_password(location);
    if config.get_password().is_some() {
        crate::secrets::register_url(location);
        bail!(
            "history store {shown}: a password in the URL would be kept in shell history and in every bundle's command; put it in PGPASSWORD instead"
        );
    }
    if let Ok(pw) = std::env::var("PGPASSWORD") {
        crate::secrets::register(&pw);
        config.password(pw);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(PG_CONNECT);
    }
    if matches!(
        config.get_ssl_mode(),
        tokio_postgres::config::SslMode::Require
    ) {
        bail!(
            "history store {shown}: sslmode=require is not supported yet (goodput connects to PostgreSQL without TLS); use a database on a trusted network or a tunnel"
        );
    }
    // The socket's connect timeout does not cover the startup exchange: a port that accepts
    // and never answers would hold `connect` without end.
    let connecting = tokio::time::timeout(PG_CONNECT, config.connect(tokio_postgres::NoTls));
    let connected = connecting.await.map_err(|_| {
        anyhow!(
            "history store {shown}: no answer within {} s of connecting (is it a PostgreSQL server?)",
            PG_CONNECT.as_secs()
        )
    })?;
    let (db, conn) = connected.map_err(|e| {
        let why = crate::text::error_chain(&e);
        let hint = if why.contains("password") {
            " (the password is read from PGPASSWORD)"
        } else {
            ""
        };
        anyhow!("history store {shown}: cannot connect: {why}{hint}")
    })?;
    tokio::spawn(async move {
        // The connection's own error reaches the caller through the client's next query.
        let _ = conn.await;
    });
    Ok(Store::Postgres { db, url: shown })
}
