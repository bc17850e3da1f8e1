//! `sqlite`: SQL over a database that crosses as bytes (SQLite 3, built into the binary by
//! `rusqlite`'s `bundled` feature), with the reference's two exports: `query` (one reading
//! statement, its rows) and `run` (a batch, the database's new bytes and one result per
//! statement).
//!
//! Every call opens its own in-memory database: the bytes are copied into SQLite's memory
//! (`sqlite3_deserialize`), worked on, and serialized back out by `run`, so a batch is atomic by
//! construction (a statement that throws leaves the caller holding the bytes it had). Nothing
//! names a file, and nothing can make SQLite open one:
//! - `ATTACH` and `DETACH` are refused by the authorizer and `SQLITE_LIMIT_ATTACHED` is 0, which
//!   also stops `VACUUM` (and `VACUUM INTO 'path'`), since SQLite vacuums through an attached
//!   database;
//! - the connection is opened without URI names, the journal and temporary tables are in memory
//!   (`journal_mode=MEMORY`, `temp_store=MEMORY`), and `PRAGMA` is refused except for the
//!   read-only and per-connection ones in [`ALLOWED_PRAGMAS`], so neither can be changed back;
//! - `load_extension` is refused by the authorizer (and extension loading is off in SQLite).
//!
//! The work is bounded: a progress handler stops a statement at the run's deadline
//! (`crate::call_deadline()`) and after [`MAX_SQLITE_STEPS`] virtual-machine steps per call;
//! rows, values and result bytes are counted as they are read, and the query stops at the cap
//! rather than after it; the database may grow to [`MAX_DATABASE_BYTES`] (`max_page_count`);
//! strings, SQL text, expression depth, compound selects, parameters and trigger depth have
//! their `sqlite3_limit`s (see [`open`]); and SQLite's heap is capped process-wide at
//! [`SQLITE_HEAP_BYTES`] (`hard_heap_limit`), so a sort or a hash of a large join fails with a
//! typed error instead of taking the process's memory.
//!
//! A database file in WAL mode (header bytes 18 and 19 are 2) is read as the rollback-journal
//! database it is once checkpointed: the two bytes are set to 1 on the copy, since an in-memory
//! database has no `-wal` file beside it.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nodetool_protocol::value::Value;
use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OpenFlags, Statement, ffi};

use crate::error::{HostError, HostErrorCode};
use crate::limits::{MAX_RESULT_BYTES, require_bytes, require_text};

/// Statements one `run` may carry (the reference's cap).
pub const MAX_SQLITE_STATEMENTS: usize = 500;
/// Rows one statement may return (the reference's cap): reading stops at the next one.
pub const MAX_SQLITE_ROWS: usize = 10_000;
/// Values (rows times columns) one call may return, over all its statements.
pub const MAX_SQLITE_VALUES: usize = 1_000_000;
/// The size the database may grow to in a call, and so the size of `run`'s bytes: 32 MiB.
pub const MAX_DATABASE_BYTES: usize = 32 * 1024 * 1024;
/// Virtual-machine steps one call may take (counted in blocks of [`STEP_BLOCK`]); a billion
/// steps is some seconds of work in a release build.
pub const MAX_SQLITE_STEPS: u64 = 1_000_000_000;
/// SQLite's heap, for every connection of the process together: 256 MiB.
pub const SQLITE_HEAP_BYTES: i64 = 256 * 1024 * 1024;
/// Longest string or blob, and the longest row: 10 MiB (the shared byte cap).
pub const MAX_SQLITE_LENGTH: i32 = 10 * 1024 * 1024;
/// Longest SQL text of one statement, in bytes.
pub const MAX_SQL_BYTES: i32 = 1024 * 1024;

/// Steps between two calls of the progress handler.
const STEP_BLOCK: i32 = 10_000;

/// The pragmas a statement may use: read-only reports and settings that change only this
/// connection's behaviour. Every other (journal and temp store, page size, `writable_schema`,
/// heap limits, `mmap_size`, ...) is refused, so the confinement set up in [`open`] stays.
pub const ALLOWED_PRAGMAS: &[&str] = &[
    "application_id",
    "case_sensitive_like",
    "collation_list",
    "data_version",
    "defer_foreign_keys",
    "encoding",
    "foreign_key_check",
    "foreign_key_list",
    "foreign_keys",
    "freelist_count",
    "function_list",
    "index_info",
    "index_list",
    "index_xinfo",
    "integrity_check",
    "module_list",
    "page_count",
    "page_size",
    "pragma_list",
    "quick_check",
    "recursive_triggers",
    "table_info",
    "table_list",
    "table_xinfo",
    "user_version",
];

/// Why the progress handler stopped a statement.
const STOP_NONE: u8 = 0;
const STOP_DEADLINE: u8 = 1;
const STOP_STEPS: u8 = 2;

/// What one call's hooks saw: why a statement was stopped, or what the authorizer refused.
struct Guard {
    stopped: AtomicU8,
    refused: Mutex<Option<String>>,
}

impl Guard {
    fn refuse(&self, what: String) -> Authorization {
        if let Ok(mut refused) = self.refused.lock() {
            refused.get_or_insert(what);
        }
        Authorization::Deny
    }
}

/// The authorizer's answer for one action.
fn authorize(guard: &Guard, context: AuthContext<'_>) -> Authorization {
    match context.action {
        AuthAction::Attach { .. } => {
            guard.refuse("ATTACH is not allowed: the database crosses as bytes, and no statement may open a file (VACUUM, which attaches one, is refused too)".into())
        }
        AuthAction::Detach { .. } => guard.refuse("DETACH is not allowed".into()),
        AuthAction::Pragma { pragma_name, .. } => {
            let name = pragma_name.to_ascii_lowercase();
            if ALLOWED_PRAGMAS.contains(&name.as_str()) {
                Authorization::Allow
            } else {
                guard.refuse(format!(
                    "PRAGMA {name} is not allowed (allowed: {})",
                    ALLOWED_PRAGMAS.join(", ")
                ))
            }
        }
        AuthAction::Function { function_name }
            if function_name.eq_ignore_ascii_case("load_extension") =>
        {
            guard.refuse("load_extension is not allowed".into())
        }
        _ => Authorization::Allow,
    }
}

/// SQLite's error for a call, as a typed error (`statement` is the 1-based statement of a
/// `run`, named in the message).
fn sql_error(at: &str, statement: Option<usize>, guard: &Guard, e: rusqlite::Error) -> HostError {
    let place = statement.map_or(String::new(), |n| format!("statement {n}: "));
    let code = match &e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
        _ => None,
    };
    match code {
        Some(ffi::ErrorCode::OperationInterrupted) => match guard.stopped.load(Ordering::Relaxed) {
            STOP_DEADLINE => {
                return HostError::deadline(format!("{at}: {place}stopped at the run's deadline"));
            }
            STOP_STEPS => {
                return HostError::limit(format!(
                    "{at}: {place}stopped after {MAX_SQLITE_STEPS} steps, the step limit of one call (a query that never ends, such as a recursive CTE without a bound?)"
                ));
            }
            _ => {}
        },
        Some(ffi::ErrorCode::AuthorizationForStatementDenied) => {
            let refused = guard.refused.lock().ok().and_then(|mut r| r.take());
            if let Some(what) = refused {
                return HostError::unsupported(format!("{at}: {place}{what}"));
            }
        }
        Some(ffi::ErrorCode::NotADatabase | ffi::ErrorCode::DatabaseCorrupt) => {
            return HostError::malformed(format!(
                "{at}: {place}the database is not a well-formed SQLite database ({e})"
            ));
        }
        Some(ffi::ErrorCode::OutOfMemory) => {
            return HostError::limit(format!(
                "{at}: {place}SQLite ran out of its {SQLITE_HEAP_BYTES} byte heap"
            ));
        }
        Some(ffi::ErrorCode::DiskFull) => {
            return HostError::output(format!(
                "{at}: {place}the database would pass the {MAX_DATABASE_BYTES} byte limit"
            ));
        }
        Some(ffi::ErrorCode::TooBig) => {
            return HostError::limit(format!(
                "{at}: {place}a string, blob, row or statement passes SQLite's length limits ({MAX_SQLITE_LENGTH} bytes of value, {MAX_SQL_BYTES} bytes of SQL)"
            ));
        }
        _ => {}
    }
    if let Some(what) = guard.refused.lock().ok().and_then(|mut r| r.take()) {
        return HostError::unsupported(format!("{at}: {place}{what}"));
    }
    match e {
        rusqlite::Error::MultipleStatement => HostError::invalid(format!(
            "{at}: {place}sql holds more than one statement; pass each as its own entry of run()"
        )),
        rusqlite::Error::SqliteFailure(_, Some(message)) => {
            HostError::invalid(format!("{at}: {place}{message}"))
        }
        e => HostError::invalid(format!("{at}: {place}{e}")),
    }
}

/// A connection over `database` (an empty database for `None`), confined and capped.
fn open(at: &str, database: Option<&[u8]>) -> Result<(Connection, Arc<Guard>), HostError> {
    let guard = Arc::new(Guard {
        stopped: AtomicU8::new(STOP_NONE),
        refused: Mutex::new(None),
    });
    let internal = |e: rusqlite::Error| {
        HostError::new(
            HostErrorCode::Internal,
            format!("{at}: SQLite could not be set up ({e})"),
        )
    };
    // No URI names, no shared cache: a plain private in-memory database.
    let mut conn = Connection::open_in_memory_with_flags(
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(internal)?;
    // Lowering it is all this pragma can do, and every call sets the same value.
    conn.execute_batch(&format!("PRAGMA hard_heap_limit={SQLITE_HEAP_BYTES}"))
        .map_err(internal)?;
    if let Some(bytes) = database.filter(|b| !b.is_empty()) {
        let mut copy = bytes.to_vec();
        if copy.len() >= 20 && copy[18] == 2 && copy[19] == 2 {
            copy[18] = 1;
            copy[19] = 1;
        }
        conn.deserialize_read_exact(rusqlite::MAIN_DB, copy.as_slice(), copy.len(), false)
            .map_err(|e| match &e {
                rusqlite::Error::SqliteFailure(f, _) if f.code == ffi::ErrorCode::OutOfMemory => {
                    HostError::limit(format!(
                        "{at}: SQLite ran out of its {SQLITE_HEAP_BYTES} byte heap"
                    ))
                }
                _ => HostError::malformed(format!(
                    "{at}: those bytes are not a SQLite database ({e})"
                )),
            })?;
        // The header is read on first use: a probe now, so that bytes that are not a database
        // are named as such rather than by whichever statement ran first.
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))
            .map_err(|e| {
                HostError::malformed(format!("{at}: those bytes are not a SQLite database ({e})"))
            })?;
    }
    let page_size: i64 = conn
        .query_row("PRAGMA page_size", [], |row| row.get(0))
        .map_err(internal)?;
    let max_pages = (MAX_DATABASE_BYTES as i64 / page_size.max(512)).max(1);
    conn.query_row("PRAGMA journal_mode=MEMORY", [], |_| Ok(()))
        .map_err(internal)?;
    conn.execute_batch(&format!(
        "PRAGMA temp_store=MEMORY; PRAGMA max_page_count={max_pages}; PRAGMA mmap_size=0;"
    ))
    .map_err(internal)?;
    use rusqlite::config::DbConfig;
    for (config, on) in [
        (DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true),
        (DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false),
        (DbConfig::SQLITE_DBCONFIG_WRITABLE_SCHEMA, false),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_ATTACH_CREATE, false),
        (DbConfig::SQLITE_DBCONFIG_ENABLE_ATTACH_WRITE, false),
    ] {
        conn.set_db_config(config, on).map_err(internal)?;
    }
    for (limit, value) in [
        (Limit::SQLITE_LIMIT_LENGTH, MAX_SQLITE_LENGTH),
        (Limit::SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_BYTES),
        (Limit::SQLITE_LIMIT_COLUMN, 2000),
        (Limit::SQLITE_LIMIT_EXPR_DEPTH, 200),
        (Limit::SQLITE_LIMIT_COMPOUND_SELECT, 100),
        (Limit::SQLITE_LIMIT_VDBE_OP, 1_000_000),
        (Limit::SQLITE_LIMIT_FUNCTION_ARG, 100),
        (Limit::SQLITE_LIMIT_ATTACHED, 0),
        (Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 10_000),
        (Limit::SQLITE_LIMIT_VARIABLE_NUMBER, 10_000),
        (Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 100),
        (Limit::SQLITE_LIMIT_WORKER_THREADS, 0),
    ] {
        conn.set_limit(limit, value).map_err(internal)?;
    }
    let auth = Arc::clone(&guard);
    conn.authorizer(Some(move |context: AuthContext<'_>| {
        authorize(&auth, context)
    }))
    .map_err(internal)?;
    let deadline = crate::call_deadline();
    let progress = Arc::clone(&guard);
    let mut steps: u64 = 0;
    conn.progress_handler(
        STEP_BLOCK,
        Some(move || {
            steps += STEP_BLOCK as u64;
            let stop = if deadline.is_some_and(|d| Instant::now() >= d) {
                STOP_DEADLINE
            } else if steps > MAX_SQLITE_STEPS {
                STOP_STEPS
            } else {
                return false;
            };
            progress.stopped.store(stop, Ordering::Relaxed);
            true
        }),
    )
    .map_err(internal)?;
    Ok((conn, guard))
}

/// The database argument: bytes, or an empty database for `null`/`undefined`.
fn database_arg<'a>(at: &str, value: Option<&'a Value>) -> Result<Option<&'a [u8]>, HostError> {
    match value {
        None | Some(Value::Undefined | Value::Null) => Ok(None),
        v => require_bytes(at, v, "database").map(Some),
    }
}

fn require_sql<'a>(at: &str, place: &str, value: Option<&'a Value>) -> Result<&'a str, HostError> {
    let sql = require_text(at, value, "sql").map_err(|e| {
        if e.code() == HostErrorCode::InvalidArgument {
            HostError::invalid(format!("{at}: {place}sql must be a non-empty string"))
        } else {
            e
        }
    })?;
    if sql.trim().is_empty() {
        return Err(HostError::invalid(format!(
            "{at}: {place}sql must be a non-empty string"
        )));
    }
    Ok(sql)
}

/// A parameter as SQLite binds it: booleans as 0/1, integral numbers as integers, objects and
/// arrays as their JSON text (SQLite has no type for them), bytes as a blob.
fn bind_value(value: &Value) -> ToSqlOutput<'_> {
    use rusqlite::types::Value as Sql;
    const SAFE: f64 = 9_007_199_254_740_991.0;
    ToSqlOutput::Owned(match value {
        Value::Undefined | Value::Null => Sql::Null,
        Value::Bool(b) => Sql::Integer(i64::from(*b)),
        Value::Number(n) if n.fract() == 0.0 && n.abs() <= SAFE => Sql::Integer(*n as i64),
        Value::Number(n) => Sql::Real(*n),
        Value::String(s) => return ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        Value::Bytes(b) => return ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        Value::Array(_) | Value::Object(_) => Sql::Text(value.to_json().to_string()),
    })
}

/// Binds `params` (an array for `?` parameters, an object for named ones, keyed without their
/// `:`/`@`/`$`) to `statement`.
fn bind(
    at: &str,
    place: &str,
    statement: &mut Statement<'_>,
    params: Option<&Value>,
) -> Result<(), HostError> {
    let wanted = statement.parameter_count();
    match params {
        None | Some(Value::Undefined | Value::Null) => {
            if wanted > 0 {
                return Err(HostError::invalid(format!(
                    "{at}: {place}the statement has {wanted} parameters and no params were given"
                )));
            }
        }
        Some(Value::Array(items)) => {
            if items.len() != wanted {
                return Err(HostError::invalid(format!(
                    "{at}: {place}the statement has {wanted} parameters and {} params were given",
                    items.len()
                )));
            }
            for (i, item) in items.iter().enumerate() {
                statement
                    .raw_bind_parameter(i + 1, bind_value(item))
                    .map_err(|e| HostError::invalid(format!("{at}: {place}param {i}: {e}")))?;
            }
        }
        Some(Value::Object(members)) => {
            for index in 1..=wanted {
                let Some(name) = statement.parameter_name(index).map(str::to_string) else {
                    return Err(HostError::invalid(format!(
                        "{at}: {place}parameter {index} is positional (?); pass an array for it"
                    )));
                };
                let key = name.get(1..).unwrap_or("");
                let Some((_, value)) = members.iter().find(|(k, _)| k == key) else {
                    return Err(HostError::invalid(format!(
                        "{at}: {place}missing named parameter {key:?}"
                    )));
                };
                statement
                    .raw_bind_parameter(index, bind_value(value))
                    .map_err(|e| HostError::invalid(format!("{at}: {place}param {key:?}: {e}")))?;
            }
        }
        Some(_) => {
            return Err(HostError::invalid(format!(
                "{at}: {place}params must be an array or an object"
            )));
        }
    }
    Ok(())
}

/// What one call has returned so far, against the result caps.
struct Budget {
    values: usize,
    bytes: usize,
}

/// A SQLite value as the guest holds it: an integer past 2^53 as its decimal string.
fn row_value(value: ValueRef<'_>) -> (Value, usize) {
    const SAFE: i64 = 9_007_199_254_740_991;
    match value {
        ValueRef::Null => (Value::Null, 0),
        ValueRef::Integer(i) if (-SAFE..=SAFE).contains(&i) => (Value::Number(i as f64), 8),
        ValueRef::Integer(i) => (Value::String(i.to_string()), 24),
        ValueRef::Real(f) => (Value::Number(f), 8),
        ValueRef::Text(t) => (
            Value::String(String::from_utf8_lossy(t).into_owned()),
            t.len(),
        ),
        ValueRef::Blob(b) => (Value::Bytes(b.to_vec()), b.len()),
    }
}

/// The rows of a reading statement, as objects keyed by column name (a repeated name keeps its
/// first place and its last value, as a JavaScript object literal would).
fn read_rows(
    at: &str,
    place: &str,
    statement: &mut Statement<'_>,
    guard: &Guard,
    number: Option<usize>,
    budget: &mut Budget,
) -> Result<Vec<Value>, HostError> {
    let names: Vec<String> = statement.column_names().map(String::from).collect();
    let mut slots: Vec<usize> = Vec::with_capacity(names.len());
    let mut keys: Vec<String> = Vec::new();
    for name in &names {
        match keys.iter().position(|k| k == name) {
            Some(i) => slots.push(i),
            None => {
                slots.push(keys.len());
                keys.push(name.clone());
            }
        }
    }
    let key_bytes: usize = keys.iter().map(String::len).sum();
    let mut out = Vec::new();
    let mut rows = statement.raw_query();
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) => return Err(sql_error(at, number, guard, e)),
        };
        if out.len() == MAX_SQLITE_ROWS {
            return Err(HostError::output(format!(
                "{at}: {place}more than {MAX_SQLITE_ROWS} rows, the row limit of one statement; add a LIMIT"
            )));
        }
        budget.values += names.len();
        budget.bytes += key_bytes;
        if budget.values > MAX_SQLITE_VALUES {
            return Err(HostError::output(format!(
                "{at}: {place}the result passes {MAX_SQLITE_VALUES} values (rows times columns), the value limit of one call"
            )));
        }
        let mut members: Vec<(String, Value)> =
            keys.iter().map(|k| (k.clone(), Value::Null)).collect();
        for (i, &slot) in slots.iter().enumerate() {
            let value = row
                .get_ref(i)
                .map_err(|e| sql_error(at, number, guard, e))?;
            let (value, size) = row_value(value);
            budget.bytes += size;
            members[slot].1 = value;
        }
        if budget.bytes > MAX_RESULT_BYTES {
            return Err(HostError::output(format!(
                "{at}: {place}the result passes the {MAX_RESULT_BYTES} byte result limit"
            )));
        }
        out.push(Value::Object(members));
    }
    Ok(out)
}

/// `query(database, sql, params?)` -> the rows of one reading statement.
pub fn query(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "sqlite.query";
    let sql = require_sql(AT, "", args.get(1))?;
    let database = database_arg(AT, args.first())?;
    let (conn, guard) = open(AT, database)?;
    let mut statement = conn
        .prepare(sql)
        .map_err(|e| sql_error(AT, None, &guard, e))?;
    if statement.column_count() == 0 || !statement.readonly() {
        return Err(HostError::invalid(format!(
            "{AT}: that statement changes the database or returns no rows; use run() for anything that writes"
        )));
    }
    bind(AT, "", &mut statement, args.get(2))?;
    let mut budget = Budget {
        values: 0,
        bytes: 0,
    };
    let rows = read_rows(AT, "", &mut statement, &guard, None, &mut budget)?;
    Ok(Value::Array(rows))
}

/// `run(database, statements)` -> `{database, results}`: the bytes after every statement
/// applied, and per statement `{rows}` (one that reads) or `{changes, lastInsertRowid}`.
pub fn run(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "sqlite.run";
    let single;
    let list: &[Value] = match args.get(1) {
        Some(Value::Array(items)) => items,
        other => {
            single = [other.cloned().unwrap_or(Value::Undefined)];
            &single
        }
    };
    if list.is_empty() {
        return Err(HostError::invalid(format!(
            "{AT}: pass at least one statement"
        )));
    }
    if list.len() > MAX_SQLITE_STATEMENTS {
        return Err(HostError::limit(format!(
            "{AT}: {} statements pass the {MAX_SQLITE_STATEMENTS} statement limit",
            list.len()
        )));
    }
    let database = database_arg(AT, args.first())?;
    let (mut conn, guard) = open(AT, database)?;
    let mut budget = Budget {
        values: 0,
        bytes: 0,
    };
    let mut results = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let number = i + 1;
        let place = format!("statement {number}: ");
        let (sql, params) = match entry {
            Value::String(_) => (Some(entry), None),
            Value::Object(_) => (entry.get("sql"), entry.get("params")),
            _ => (None, None),
        };
        let sql = require_sql(AT, &place, sql)?;
        let mut statement = conn
            .prepare(sql)
            .map_err(|e| sql_error(AT, Some(number), &guard, e))?;
        bind(AT, &place, &mut statement, params)?;
        if statement.column_count() > 0 {
            let rows = read_rows(
                AT,
                &place,
                &mut statement,
                &guard,
                Some(number),
                &mut budget,
            )?;
            results.push(Value::Object(vec![("rows".into(), Value::Array(rows))]));
        } else {
            let before = conn.total_changes();
            statement
                .raw_execute()
                .map_err(|e| sql_error(AT, Some(number), &guard, e))?;
            drop(statement);
            // A statement that changed no row reports 0, not the count of the last one that did.
            let changes = if conn.total_changes() == before {
                0
            } else {
                conn.changes()
            };
            let (rowid, _) = row_value(ValueRef::Integer(conn.last_insert_rowid()));
            results.push(Value::Object(vec![
                ("changes".into(), Value::Number(changes as f64)),
                ("lastInsertRowid".into(), rowid),
            ]));
        }
    }
    if !conn.is_autocommit() {
        return Err(HostError::invalid(format!(
            "{AT}: a transaction is still open after the last statement; end it with COMMIT (or ROLLBACK)"
        )));
    }
    let bytes = serialize(AT, &mut conn, &guard)?;
    Ok(Value::Object(vec![
        ("database".into(), Value::Bytes(bytes)),
        ("results".into(), Value::Array(results)),
    ]))
}

/// The database's bytes (none for a database that has no page yet).
fn serialize(at: &str, conn: &mut Connection, guard: &Guard) -> Result<Vec<u8>, HostError> {
    let pages: i64 = conn
        .query_row("PRAGMA page_count", [], |row| row.get(0))
        .map_err(|e| sql_error(at, None, guard, e))?;
    if pages == 0 {
        return Ok(Vec::new());
    }
    let data = conn
        .serialize(rusqlite::MAIN_DB)
        .map_err(|e| sql_error(at, None, guard, e))?;
    if data.len() > MAX_DATABASE_BYTES {
        return Err(HostError::output(format!(
            "{at}: the database would pass the {MAX_DATABASE_BYTES} byte limit"
        )));
    }
    Ok(data.to_vec())
}
