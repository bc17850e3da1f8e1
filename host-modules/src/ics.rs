//! `ics`: iCalendar (RFC 5545) text from plain event objects, taking the `ics` npm library's
//! event attributes (the reference's library) and writing its property order, with the parts
//! of RFC 5545 it gets wrong written right.
//!
//! Output rules:
//! - A `VCALENDAR` with `VERSION:2.0`, `CALSCALE:GREGORIAN`, `PRODID` (default
//!   `adamgibbons/ics`), `METHOD` (default `PUBLISH`), `X-WR-CALNAME` when named and
//!   `X-PUBLISHED-TTL:PT1H`; the header comes from the first event (and `createEvents`' second
//!   argument). One `VEVENT` per event, its properties in the library's order.
//! - Lines end in CRLF and are folded at 75 octets (never inside a UTF-8 sequence), each
//!   continuation starting with one space; the library counts code points, so its lines with
//!   non-ASCII text run past 75 octets.
//! - TEXT values escape `\`, `;`, `,` and line breaks (`\n`) everywhere, alarm text and each
//!   category included (the library escapes only the summary, description and location).
//!   Parameter values are quoted, with RFC 6868's `^'`, `^n` and `^^` for a double quote, line
//!   break and caret (the library writes `\"`, which no parser reads).
//! - Dates: `[y, m, d]` is a DATE (`VALUE=DATE`); `[y, m, d, h?, min?, s?]` a date-time,
//!   normalized as JavaScript's `Date` does (minute 60 is the next hour) and written in UTC
//!   (`Z`) unless the output type is `local` (a floating time). The host has no local time
//!   zone: `local` input is read as UTC, as on a server. A number is epoch milliseconds; a
//!   string is an iCalendar `YYYYMMDD` / `YYYYMMDDTHHMMSS[Z]` written as given, or ISO 8601
//!   (`2024-05-01`, `2024-05-01T09:30:00+02:00`) converted.
//! - Durations are RFC 5545 `dur-value`s (`P1D`, `PT1H30M`, `P2W`; weeks with other parts are
//!   counted in days); the library writes `P1DT`, which is not one.
//! - `DTSTAMP` defaults to now, `UID` to 21 random URL-safe characters (the library's nanoid
//!   length).
//!
//! Caps: [`MAX_EVENTS`] events, [`MAX_TEXT_CHARS`] characters of text over the whole call,
//! [`MAX_LIST_ITEMS`] attendees, alarms, categories or exclusion dates per event.

use std::fmt::Write as _;

use nodetool_protocol::limits::MAX_HOST_INPUT_CHARS;
use nodetool_protocol::value::Value;

use crate::error::HostError;
use crate::limits::js_number;

/// Events per call.
pub const MAX_EVENTS: usize = 10_000;
/// Characters of text (every string value) over one call's events.
pub const MAX_TEXT_CHARS: usize = MAX_HOST_INPUT_CHARS;
/// Attendees, alarms, categories or exclusion dates in one event.
pub const MAX_LIST_ITEMS: usize = 1_000;

/// `createEvent(event)` -> the calendar text of one event.
pub fn create_event(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "ics.createEvent";
    let event = match args.first() {
        Some(v @ Value::Object(_)) => v,
        _ => {
            return Err(HostError::invalid(format!(
                "{AT}: event must be an object with at least a start"
            )));
        }
    };
    calendar(AT, std::slice::from_ref(event), None).map(Value::String)
}

/// `createEvents(events, header?)` -> the calendar text of every event; `header` may set
/// `productId`, `method` and `calName` (as the library's second argument).
pub fn create_events(args: &[Value]) -> Result<Value, HostError> {
    const AT: &str = "ics.createEvents";
    let events = match args.first() {
        Some(Value::Array(items)) if !items.is_empty() => items,
        _ => {
            return Err(HostError::invalid(format!(
                "{AT}: provide a non-empty array of events"
            )));
        }
    };
    if events.len() > MAX_EVENTS {
        return Err(HostError::limit(format!(
            "{AT}: {} events is more than the {MAX_EVENTS} event limit",
            events.len()
        )));
    }
    let header = match args.get(1) {
        Some(Value::Object(members)) => Some(members.as_slice()),
        _ => None,
    };
    calendar(AT, events, header).map(Value::String)
}

/// The attribute names the library accepts (its schema refuses any other).
const EVENT_KEYS: &[&str] = &[
    "productId",
    "method",
    "calName",
    "summary",
    "timestamp",
    "title",
    "uid",
    "sequence",
    "start",
    "duration",
    "startType",
    "startInputType",
    "startOutputType",
    "end",
    "endInputType",
    "endOutputType",
    "description",
    "url",
    "geo",
    "location",
    "status",
    "categories",
    "organizer",
    "attendees",
    "alarms",
    "recurrenceRule",
    "busyStatus",
    "transp",
    "classification",
    "created",
    "lastModified",
    "exclusionDates",
    "htmlContent",
    "recurrenceId",
];
const HEADER_KEYS: &[&str] = &["productId", "method", "calName"];
const CONTACT_KEYS: &[&str] = &[
    "name",
    "email",
    "rsvp",
    "dir",
    "partstat",
    "role",
    "scheduleAgent",
    "cutype",
    "xNumGuests",
];
const ORGANIZER_KEYS: &[&str] = &["name", "email", "dir", "sentBy"];
const ALARM_KEYS: &[&str] = &[
    "action",
    "trigger",
    "description",
    "duration",
    "repeat",
    "attach",
    "attachType",
    "summary",
    "attendee",
    "x-prop",
    "iana-prop",
];
const DURATION_KEYS: &[&str] = &["before", "weeks", "days", "hours", "minutes", "seconds"];

/// One object's members, read with the path its messages name (`events[2].organizer`).
struct Obj<'a> {
    at: &'static str,
    path: String,
    members: &'a [(String, Value)],
}

impl<'a> Obj<'a> {
    fn new(
        at: &'static str,
        path: String,
        value: &'a Value,
        keys: &[&str],
    ) -> Result<Obj<'a>, HostError> {
        let Value::Object(members) = value else {
            return Err(HostError::invalid(format!(
                "{at}: {} must be an object",
                label(&path)
            )));
        };
        for (key, v) in members {
            if !keys.contains(&key.as_str()) && !matches!(v, Value::Undefined) {
                return Err(HostError::invalid(format!(
                    "{at}: {} has an unknown field {key:?}",
                    label(&path)
                )));
            }
        }
        Ok(Obj { at, path, members })
    }

    fn name(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// A present value (`undefined` and `null` are absent).
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .filter(|v| !matches!(v, Value::Undefined | Value::Null))
    }

    fn error(&self, key: &str, what: &str) -> HostError {
        HostError::invalid(format!("{}: {} {what}", self.at, self.name(key)))
    }

    fn string(&self, key: &str, budget: &mut usize) -> Result<Option<&'a str>, HostError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => {
                charge(self.at, budget, s)?;
                Ok(Some(s))
            }
            Some(_) => Err(self.error(key, "must be a string")),
        }
    }

    fn number(&self, key: &str) -> Result<Option<f64>, HostError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) if n.is_finite() => Ok(Some(*n)),
            Some(_) => Err(self.error(key, "must be a finite number")),
        }
    }

    fn boolean(&self, key: &str) -> Result<Option<bool>, HostError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.error(key, "must be a boolean")),
        }
    }

    fn list(&self, key: &str) -> Result<Option<&'a [Value]>, HostError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) if items.len() > MAX_LIST_ITEMS => {
                Err(HostError::limit(format!(
                    "{}: {} has {} items, more than the {MAX_LIST_ITEMS} item limit",
                    self.at,
                    self.name(key),
                    items.len()
                )))
            }
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(_) => Err(self.error(key, "must be an array")),
        }
    }

    /// A string that must be one of `allowed` (compared without case); written upper-case.
    fn keyword(
        &self,
        key: &str,
        allowed: &[&str],
        budget: &mut usize,
    ) -> Result<Option<String>, HostError> {
        let Some(s) = self.string(key, budget)? else {
            return Ok(None);
        };
        let upper = s.to_ascii_uppercase();
        if allowed.contains(&upper.as_str()) {
            Ok(Some(upper))
        } else {
            Err(self.error(key, &format!("must be one of {}", allowed.join(", "))))
        }
    }
}

/// An object's name in a message (`createEvent`'s one event has no path).
fn label(path: &str) -> &str {
    if path.is_empty() { "the event" } else { path }
}

/// Counts `s` against the call's text budget.
fn charge(at: &str, budget: &mut usize, s: &str) -> Result<(), HostError> {
    let n = s.chars().count();
    if n > *budget {
        return Err(HostError::limit(format!(
            "{at}: the events hold more than the {MAX_TEXT_CHARS} character text limit"
        )));
    }
    *budget -= n;
    Ok(())
}

/// The whole calendar.
fn calendar(
    at: &'static str,
    events: &[Value],
    header: Option<&[(String, Value)]>,
) -> Result<String, HostError> {
    let mut budget = MAX_TEXT_CHARS;
    let now_ms = now_ms();
    // The header's fields come from the first event, then the explicit header.
    let first = Obj::new(at, path_of(at, 0), &events[0], EVENT_KEYS)?;
    let mut product = first.string("productId", &mut budget)?.map(str::to_string);
    let mut method = first.string("method", &mut budget)?.map(str::to_string);
    let mut cal_name = first.string("calName", &mut budget)?.map(str::to_string);
    if let Some(members) = header {
        let value = Value::Object(members.to_vec());
        let h = Obj::new(at, "header".into(), &value, HEADER_KEYS)?;
        if let Some(s) = h.string("productId", &mut budget)? {
            product = Some(s.into());
        }
        if let Some(s) = h.string("method", &mut budget)? {
            method = Some(s.into());
        }
        if let Some(s) = h.string("calName", &mut budget)? {
            cal_name = Some(s.into());
        }
    }
    let mut out = Writer::default();
    out.line("BEGIN:VCALENDAR");
    out.line("VERSION:2.0");
    out.line("CALSCALE:GREGORIAN");
    out.line(&format!(
        "PRODID:{}",
        text(product.as_deref().unwrap_or("adamgibbons/ics"))
    ));
    let method = method.unwrap_or_else(|| "PUBLISH".into());
    if !method.is_empty() {
        out.line(&format!("METHOD:{}", token(at, "method", &method)?));
    }
    if let Some(name) = cal_name.filter(|n| !n.is_empty()) {
        out.line(&format!("X-WR-CALNAME:{}", text(&name)));
    }
    out.line("X-PUBLISHED-TTL:PT1H");
    for (i, event) in events.iter().enumerate() {
        let event = Obj::new(at, path_of(at, i), event, EVENT_KEYS)?;
        write_event(&mut out, &event, now_ms, &mut budget)?;
    }
    out.line("END:VCALENDAR");
    Ok(out.text)
}

/// How an event is named in messages: nothing for `createEvent`'s one, `events[i]` otherwise.
fn path_of(at: &str, i: usize) -> String {
    if at == "ics.createEvent" {
        String::new()
    } else {
        format!("events[{i}]")
    }
}

fn write_event(
    out: &mut Writer,
    e: &Obj<'_>,
    now_ms: i64,
    budget: &mut usize,
) -> Result<(), HostError> {
    let at = e.at;
    // The header fields were read from the first event; the others' are checked and unused,
    // as in the library.
    for key in HEADER_KEYS {
        let mut unlimited = usize::MAX;
        e.string(key, &mut unlimited)?;
    }
    let start = match e.get("start") {
        Some(v) => when(e, "start", v, budget)?,
        None => return Err(e.error("start", "is required")),
    };
    let kind = |key: &str, b: &mut usize| -> Result<Option<bool>, HostError> {
        // `true` for utc, `false` for local.
        match e.string(key, b)? {
            None => Ok(None),
            Some("utc") => Ok(Some(true)),
            Some("local") => Ok(Some(false)),
            Some(_) => Err(e.error(key, "must be \"utc\" or \"local\"")),
        }
    };
    let start_type = kind("startType", budget)?;
    let _start_input = kind("startInputType", budget)?;
    let start_output = kind("startOutputType", budget)?.or(start_type);
    let _end_input = kind("endInputType", budget)?;
    let end_output = kind("endOutputType", budget)?.or(start_output);
    let end = e
        .get("end")
        .map(|v| when(e, "end", v, budget))
        .transpose()?;
    let duration = e
        .get("duration")
        .map(|v| duration_of(e, "duration", v, false))
        .transpose()?;
    if end.is_some() && duration.is_some() {
        return Err(HostError::invalid(format!(
            "{at}: {} should have end or duration (but not both)",
            label(&e.path)
        )));
    }
    let uid = match e.string("uid", budget)? {
        Some(u) if !u.is_empty() => u.to_string(),
        _ => random_uid(),
    };
    let title = match e.string("title", budget)? {
        Some(t) => Some(t),
        None => e.string("summary", budget)?.or(Some("Untitled event")),
    };
    let timestamp = match e.get("timestamp") {
        // DTSTAMP is a UTC date-time by RFC 5545.
        Some(v) => match when(e, "timestamp", v, budget)? {
            When::Date(_) => return Err(e.error("timestamp", "must be a date-time, not a date")),
            w => w,
        },
        None => When::Instant(now_ms.div_euclid(1000)),
    };

    out.line("BEGIN:VEVENT");
    out.line(&format!("UID:{}", text(&uid)));
    if let Some(t) = title.filter(|t| !t.is_empty()) {
        out.line(&format!("SUMMARY:{}", text(t)));
    }
    out.line(&format!("DTSTAMP{}", timestamp.property(true)?.1));
    let (start_param, start_value) = start.property(start_output.unwrap_or(true))?;
    out.line(&format!("DTSTART{start_param}{start_value}"));
    if let Some(end) = &end {
        // A one-day all-day event needs no end, as the library leaves it out.
        let same_day = matches!((&start, end), (When::Date(a), When::Date(b)) if a == b);
        if !same_day {
            let (p, v) = end.property(end_output.unwrap_or(true))?;
            out.line(&format!("DTEND{p}{v}"));
        }
    }
    if let Some(n) = e.number("sequence")? {
        if n.fract() != 0.0 || !(0.0..=2_147_483_647.0).contains(&n) {
            return Err(e.error("sequence", "must be an integer from 0 to 2147483647"));
        }
        out.line(&format!("SEQUENCE:{n}"));
    }
    if let Some(d) = e.string("description", budget)?.filter(|d| !d.is_empty()) {
        out.line(&format!("DESCRIPTION:{}", text(d)));
    }
    if let Some(u) = e.string("url", budget)?.filter(|u| !u.is_empty()) {
        out.line(&format!("URL:{}", uri(e, "url", u)?));
    }
    if let Some(g) = e.get("geo") {
        let geo = Obj::new(at, e.name("geo"), g, &["lat", "lon"])?;
        let (Some(lat), Some(lon)) = (geo.number("lat")?, geo.number("lon")?) else {
            return Err(e.error("geo", "must have numeric lat and lon"));
        };
        if !(-90.0..=90.0).contains(&lat) || !(-180.0..=180.0).contains(&lon) {
            return Err(e.error("geo", "must have lat in -90..90 and lon in -180..180"));
        }
        out.line(&format!("GEO:{};{}", js_number(lat), js_number(lon)));
    }
    if let Some(l) = e.string("location", budget)?.filter(|l| !l.is_empty()) {
        out.line(&format!("LOCATION:{}", text(l)));
    }
    if let Some(s) = e.keyword("status", &["TENTATIVE", "CANCELLED", "CONFIRMED"], budget)? {
        out.line(&format!("STATUS:{s}"));
    }
    if let Some(items) = e.list("categories")? {
        let mut parts = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match item {
                Value::String(s) => {
                    charge(at, budget, s)?;
                    parts.push(text(s));
                }
                _ => return Err(e.error(&format!("categories[{i}]"), "must be a string")),
            }
        }
        if !parts.is_empty() {
            out.line(&format!("CATEGORIES:{}", parts.join(",")));
        }
    }
    if let Some(o) = e.get("organizer") {
        let o = Obj::new(at, e.name("organizer"), o, ORGANIZER_KEYS)?;
        let mut line = String::from("ORGANIZER");
        if let Some(dir) = o.string("dir", budget)? {
            let _ = write!(line, ";DIR={}", param(dir));
        }
        if let Some(by) = o.string("sentBy", budget)? {
            let _ = write!(
                line,
                ";SENT-BY={}",
                param(&format!("MAILTO:{}", email(&o, "sentBy", by)?))
            );
        }
        let name = o.string("name", budget)?.filter(|n| !n.is_empty());
        let _ = write!(line, ";CN={}", param(name.unwrap_or("Organizer")));
        let Some(address) = o.string("email", budget)? else {
            return Err(o.error("email", "is required (ORGANIZER's value is its address)"));
        };
        let _ = write!(line, ":MAILTO:{}", email(&o, "email", address)?);
        out.line(&line);
    }
    if let Some(b) = e.keyword("busyStatus", &["TENTATIVE", "FREE", "BUSY", "OOF"], budget)? {
        out.line(&format!("X-MICROSOFT-CDO-BUSYSTATUS:{b}"));
    }
    if let Some(t) = e.keyword("transp", &["TRANSPARENT", "OPAQUE"], budget)? {
        out.line(&format!("TRANSP:{t}"));
    }
    if let Some(c) = e
        .string("classification", budget)?
        .filter(|c| !c.is_empty())
    {
        out.line(&format!(
            "CLASS:{}",
            token(at, &e.name("classification"), c)?
        ));
    }
    for (key, property) in [("created", "CREATED"), ("lastModified", "LAST-MODIFIED")] {
        if let Some(v) = e.get(key) {
            // Both are UTC date-times by RFC 5545.
            let w = when(e, key, v, budget)?;
            if matches!(w, When::Date(_)) {
                return Err(e.error(key, "must be a date-time, not a date"));
            }
            out.line(&format!("{property}{}", w.property(true)?.1));
        }
    }
    if let Some(h) = e.string("htmlContent", budget)?.filter(|h| !h.is_empty()) {
        out.line(&format!("X-ALT-DESC;FMTTYPE=text/html:{}", text(h)));
    }
    if let Some(attendees) = e.list("attendees")? {
        for (i, a) in attendees.iter().enumerate() {
            let a = Obj::new(at, e.name(&format!("attendees[{i}]")), a, CONTACT_KEYS)?;
            out.line(&format!("ATTENDEE{}", contact(&a, budget)?));
        }
    }
    if let Some(rule) = e
        .string("recurrenceRule", budget)?
        .filter(|r| !r.is_empty())
    {
        out.line(&format!("RRULE:{}", recurrence_rule(e, rule)?));
    }
    if let Some(dates) = e.list("exclusionDates")? {
        let (mut days, mut times) = (Vec::new(), Vec::new());
        for (i, d) in dates.iter().enumerate() {
            let w = when(e, &format!("exclusionDates[{i}]"), d, budget)?;
            let (_, value) = w.property(true)?;
            let value = value.trim_start_matches(':').to_string();
            if matches!(w, When::Date(_)) {
                days.push(value);
            } else {
                times.push(value);
            }
        }
        if !times.is_empty() {
            out.line(&format!("EXDATE:{}", times.join(",")));
        }
        if !days.is_empty() {
            out.line(&format!("EXDATE;VALUE=DATE:{}", days.join(",")));
        }
    }
    if let Some(d) = duration {
        out.line(&format!("DURATION:{d}"));
    }
    if let Some(alarms) = e.list("alarms")? {
        for (i, a) in alarms.iter().enumerate() {
            let a = Obj::new(at, e.name(&format!("alarms[{i}]")), a, ALARM_KEYS)?;
            write_alarm(out, &a, budget)?;
        }
    }
    if let Some(v) = e.get("recurrenceId") {
        let w = when(e, "recurrenceId", v, budget)?;
        let (p, v) = w.property(true)?;
        out.line(&format!("RECURRENCE-ID{p}{v}"));
    }
    out.line("END:VEVENT");
    Ok(())
}

fn write_alarm(out: &mut Writer, a: &Obj<'_>, budget: &mut usize) -> Result<(), HostError> {
    let action = match a.string("action", budget)? {
        Some(s @ ("audio" | "display" | "email")) => s.to_ascii_uppercase(),
        Some(_) => return Err(a.error("action", "must be \"audio\", \"display\" or \"email\"")),
        None => return Err(a.error("action", "is required")),
    };
    let Some(trigger) = a.get("trigger") else {
        return Err(a.error("trigger", "is required"));
    };
    let trigger = match trigger {
        Value::Object(_) => format!("TRIGGER:{}", duration_of(a, "trigger", trigger, true)?),
        other => {
            let w = when(a, "trigger", other, budget)?;
            if matches!(w, When::Date(_)) {
                return Err(a.error("trigger", "must be a date-time or a duration, not a date"));
            }
            // RFC 5545: an absolute trigger is a UTC date-time.
            format!("TRIGGER;VALUE=DATE-TIME{}", w.property(true)?.1)
        }
    };
    if let Some(attendee) = a.get("attendee") {
        Obj::new(a.at, a.name("attendee"), attendee, CONTACT_KEYS)?;
    }
    out.line("BEGIN:VALARM");
    out.line(&format!("ACTION:{action}"));
    if let Some(n) = a.number("repeat")? {
        if n.fract() != 0.0 || !(0.0..=1e6).contains(&n) {
            return Err(a.error("repeat", "must be an integer from 0 to 1000000"));
        }
        if n != 0.0 {
            out.line(&format!("REPEAT:{n}"));
        }
    }
    if let Some(d) = a.string("description", budget)?.filter(|d| !d.is_empty()) {
        out.line(&format!("DESCRIPTION:{}", text(d)));
    }
    if let Some(d) = a.get("duration") {
        out.line(&format!(
            "DURATION:{}",
            duration_of(a, "duration", d, false)?
        ));
    }
    if let Some(attach) = a.string("attach", budget)?.filter(|s| !s.is_empty()) {
        let kind = a
            .string("attachType", budget)?
            .unwrap_or("FMTTYPE=audio/basic");
        let kind = attach_type(a, kind)?;
        out.line(&format!("ATTACH;{kind}:{}", uri(a, "attach", attach)?));
    }
    out.line(&trigger);
    if let Some(s) = a.string("summary", budget)?.filter(|s| !s.is_empty()) {
        out.line(&format!("SUMMARY:{}", text(s)));
    }
    out.line("END:VALARM");
    Ok(())
}

/// An attendee's parameters and address, in the library's order.
fn contact(a: &Obj<'_>, budget: &mut usize) -> Result<String, HostError> {
    let mut line = String::new();
    if let Some(rsvp) = a.boolean("rsvp")? {
        line.push_str(if rsvp { ";RSVP=TRUE" } else { ";RSVP=FALSE" });
    }
    if let Some(c) = a.string("cutype", budget)?.filter(|s| !s.is_empty()) {
        let _ = write!(line, ";CUTYPE={}", param(c));
    }
    if let Some(n) = a.number("xNumGuests")? {
        let _ = write!(line, ";X-NUM-GUESTS={}", js_number(n));
    }
    if let Some(r) = a.string("role", budget)?.filter(|s| !s.is_empty()) {
        let _ = write!(line, ";ROLE={}", param(r));
    }
    if let Some(p) = a.string("partstat", budget)?.filter(|s| !s.is_empty()) {
        let _ = write!(line, ";PARTSTAT={}", param(p));
    }
    if let Some(d) = a.string("dir", budget)?.filter(|s| !s.is_empty()) {
        let _ = write!(line, ";DIR={}", param(uri(a, "dir", d)?));
    }
    if let Some(s) = a.string("scheduleAgent", budget)?.filter(|s| !s.is_empty()) {
        if !matches!(s, "SERVER" | "CLIENT" | "NONE") {
            return Err(a.error("scheduleAgent", "must be SERVER, CLIENT or NONE"));
        }
        let _ = write!(line, ";SCHEDULE-AGENT={}", param(s));
    }
    let name = a.string("name", budget)?.filter(|n| !n.is_empty());
    let _ = write!(line, ";CN={}", param(name.unwrap_or("Unnamed attendee")));
    let Some(address) = a.string("email", budget)? else {
        return Err(a.error("email", "is required (ATTENDEE's value is its address)"));
    };
    let _ = write!(line, ":mailto:{}", email(a, "email", address)?);
    Ok(line)
}

/// A date the library accepts, read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum When {
    /// A DATE.
    Date((i64, u32, u32)),
    /// Seconds since the epoch (input read as UTC).
    Instant(i64),
    /// An iCalendar date-time string, written as given.
    Verbatim(String),
}

impl When {
    /// The `;VALUE=DATE` parameter (or nothing) and `:value`, UTC or floating.
    fn property(&self, utc: bool) -> Result<(&'static str, String), HostError> {
        Ok(match self {
            When::Date((y, m, d)) => (";VALUE=DATE", format!(":{y:04}{m:02}{d:02}")),
            When::Verbatim(s) => ("", format!(":{s}")),
            When::Instant(secs) => {
                let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
                let t = secs.rem_euclid(86_400);
                let z = if utc { "Z" } else { "" };
                (
                    "",
                    format!(
                        ":{y:04}{m:02}{d:02}T{:02}{:02}{:02}{z}",
                        t / 3600,
                        t / 60 % 60,
                        t % 60
                    ),
                )
            }
        })
    }
}

/// The years a date may have (four digits, as iCalendar writes them).
const YEARS: std::ops::RangeInclusive<i64> = 0..=9999;

fn when(o: &Obj<'_>, key: &str, v: &Value, budget: &mut usize) -> Result<When, HostError> {
    let bad = |what: &str| o.error(key, what);
    let w = match v {
        Value::Number(ms) => {
            if !ms.is_finite() || ms.fract() != 0.0 || *ms < 0.0 {
                return Err(bad("must be a non-negative integer of epoch milliseconds"));
            }
            When::Instant((*ms / 1000.0).floor() as i64)
        }
        Value::String(s) => {
            charge(o.at, budget, s)?;
            parse_date_text(s).ok_or_else(|| {
                bad("must be an iCalendar date (20240501, 20240501T093000Z) or ISO 8601 text")
            })?
        }
        Value::Array(parts) => {
            if !(3..=7).contains(&parts.len()) {
                return Err(bad(
                    "must be an array of 3 to 6 numbers [year, month, day, hour, minute, second]",
                ));
            }
            let mut n = [0i64; 6];
            // Ranges as the library's schema checks them (a minute or second of 60 rolls over).
            let ranges: [(i64, i64); 6] = [(0, 9999), (1, 12), (1, 31), (0, 23), (0, 60), (0, 60)];
            for (i, part) in parts.iter().take(6).enumerate() {
                match part {
                    Value::Number(x)
                        if x.fract() == 0.0
                            && (ranges[i].0 as f64..=ranges[i].1 as f64).contains(x) =>
                    {
                        n[i] = *x as i64;
                    }
                    _ => {
                        return Err(o.error(
                            &format!("{key}[{i}]"),
                            &format!("must be an integer from {} to {}", ranges[i].0, ranges[i].1),
                        ));
                    }
                }
            }
            if parts.len() == 3 {
                if n[2] > days_in_month(n[0], n[1] as u32) as i64 {
                    return Err(bad("is not a date of the calendar (that month is shorter)"));
                }
                When::Date((n[0], n[1] as u32, n[2] as u32))
            } else {
                let days = days_from_civil(n[0], n[1] as u32, 1) + n[2] - 1;
                When::Instant(days * 86_400 + n[3] * 3600 + n[4] * 60 + n[5])
            }
        }
        _ => return Err(bad("must be a date array, epoch milliseconds or date text")),
    };
    if let When::Instant(secs) = w
        && !YEARS.contains(&civil_from_days(secs.div_euclid(86_400)).0)
    {
        return Err(bad("is outside the years 0 to 9999"));
    }
    Ok(w)
}

/// iCalendar `YYYYMMDD[THHMMSS[Z]]` or ISO 8601 `YYYY-MM-DD[THH:MM[:SS[.fff]][Z|±HH:MM]]`.
fn parse_date_text(s: &str) -> Option<When> {
    let digits = |t: &str| -> Option<i64> {
        (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then(|| t.parse().ok())?
    };
    let valid_date = |y: i64, m: i64, d: i64| {
        (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m as u32) as i64
    };
    let valid_time = |h: i64, mi: i64, sec: i64| h < 24 && mi < 60 && sec <= 60;
    let b = s.as_bytes();
    // iCalendar forms.
    if b.len() >= 8 && b[..8].iter().all(u8::is_ascii_digit) {
        let (y, m, d) = (digits(&s[0..4])?, digits(&s[4..6])?, digits(&s[6..8])?);
        if !valid_date(y, m, d) {
            return None;
        }
        if b.len() == 8 {
            return Some(When::Date((y, m as u32, d as u32)));
        }
        let rest = &s[8..];
        let time = rest.strip_prefix('T')?;
        let time = time.strip_suffix('Z').unwrap_or(time);
        if time.len() != 6 {
            return None;
        }
        let (h, mi, sec) = (
            digits(&time[0..2])?,
            digits(&time[2..4])?,
            digits(&time[4..6])?,
        );
        return valid_time(h, mi, sec).then(|| When::Verbatim(s.to_string()));
    }
    // ISO 8601.
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (digits(&s[0..4])?, digits(&s[5..7])?, digits(&s[8..10])?);
    if !valid_date(y, m, d) {
        return None;
    }
    if b.len() == 10 {
        return Some(When::Date((y, m as u32, d as u32)));
    }
    let rest = s[10..].strip_prefix(['T', ' '])?;
    if rest.len() < 5 || rest.as_bytes()[2] != b':' {
        return None;
    }
    let (h, mi) = (digits(&rest[0..2])?, digits(&rest[3..5])?);
    let mut rest = &rest[5..];
    let mut sec = 0;
    if let Some(r) = rest.strip_prefix(':') {
        sec = digits(r.get(0..2)?)?;
        rest = &r[2..];
        if let Some(r) = rest.strip_prefix('.') {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 {
                return None;
            }
            rest = &r[n..];
        }
    }
    if !valid_time(h, mi, sec) {
        return None;
    }
    let offset = match rest {
        "" | "Z" => 0,
        _ => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let r = &rest[1..];
            let (oh, om) = match r.len() {
                5 if r.as_bytes()[2] == b':' => (digits(&r[0..2])?, digits(&r[3..5])?),
                4 => (digits(&r[0..2])?, digits(&r[2..4])?),
                2 => (digits(r)?, 0),
                _ => return None,
            };
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
    };
    let days = days_from_civil(y, m as u32, d as u32);
    Some(When::Instant(
        days * 86_400 + h * 3600 + mi * 60 + sec - offset,
    ))
}

/// A duration object as an RFC 5545 `dur-value` (`-` first when `before` and allowed).
fn duration_of(o: &Obj<'_>, key: &str, v: &Value, signed: bool) -> Result<String, HostError> {
    let d = Obj::new(o.at, o.name(key), v, DURATION_KEYS)?;
    let mut n = [0u64; 5];
    for (i, part) in ["weeks", "days", "hours", "minutes", "seconds"]
        .iter()
        .enumerate()
    {
        if let Some(x) = d.number(part)? {
            if x.fract() != 0.0 || !(0.0..=1e9).contains(&x) {
                return Err(d.error(part, "must be a whole number from 0 to 1000000000"));
            }
            n[i] = x as u64;
        }
    }
    let before = d.boolean("before")?.unwrap_or(false);
    if before && !signed {
        return Err(d.error("before", "only applies to an alarm's trigger"));
    }
    let [weeks, days, hours, minutes, seconds] = n;
    let mut out = String::from(if before { "-P" } else { "P" });
    if weeks > 0 && days + hours + minutes + seconds == 0 {
        let _ = write!(out, "{weeks}W");
        return Ok(out);
    }
    let days = days + weeks * 7;
    if days > 0 {
        let _ = write!(out, "{days}D");
    }
    if hours + minutes + seconds > 0 || days == 0 {
        out.push('T');
        if hours > 0 {
            let _ = write!(out, "{hours}H");
        }
        if minutes > 0 {
            let _ = write!(out, "{minutes}M");
        }
        if seconds > 0 || hours + minutes == 0 {
            let _ = write!(out, "{seconds}S");
        }
    }
    Ok(out)
}

/// A TEXT value, escaped (RFC 5545 §3.3.11).
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => out.push_str("\\n"),
            // Other controls are not allowed in a TEXT value.
            c if c.is_control() && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// A quoted parameter value with RFC 6868's escapes (no control character survives).
fn param(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '^' => out.push_str("^^"),
            '"' => out.push_str("^'"),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' => out.push_str("^n"),
            c if c.is_control() && c != '\t' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A value written as is (a method or classification name): letters, digits and `-`.
fn token<'s>(at: &str, name: &str, s: &'s str) -> Result<&'s str, HostError> {
    if s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
        Ok(s)
    } else {
        Err(HostError::invalid(format!(
            "{at}: {name} may hold only letters, digits and \"-\""
        )))
    }
}

/// A URI: a scheme, `:`, and no space or control character.
fn uri<'s>(o: &Obj<'_>, key: &str, s: &'s str) -> Result<&'s str, HostError> {
    let scheme = s.split_once(':').map(|(scheme, _)| scheme).unwrap_or("");
    let scheme_ok = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if scheme_ok
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '"')
    {
        Ok(s)
    } else {
        Err(o.error(key, "must be a URL (scheme:..., no spaces)"))
    }
}

/// An e-mail address: one `@` between non-empty parts, no space, control, quote or `:`.
fn email<'s>(o: &Obj<'_>, key: &str, s: &'s str) -> Result<&'s str, HostError> {
    let ok = s.split_once('@').is_some_and(|(local, domain)| {
        !local.is_empty() && !domain.is_empty() && !domain.contains('@')
    }) && !s
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | ':' | ';' | ','));
    if ok {
        Ok(s)
    } else {
        Err(o.error(key, "must be an e-mail address"))
    }
}

/// An alarm's attachment parameter (`FMTTYPE=audio/basic`): a name, `=`, and a value with no
/// character that would end the parameter.
fn attach_type<'s>(o: &Obj<'_>, s: &'s str) -> Result<&'s str, HostError> {
    let ok = s.split_once('=').is_some_and(|(name, value)| {
        !name.is_empty()
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !value
                .chars()
                .any(|c| c.is_control() || matches!(c, '"' | ':' | ';' | ','))
    });
    if ok {
        Ok(s)
    } else {
        Err(o.error(
            "attachType",
            "must be one parameter, as FMTTYPE=audio/basic",
        ))
    }
}

/// An RRULE value: `NAME=VALUE` parts joined by `;`, with a FREQ.
fn recurrence_rule<'s>(o: &Obj<'_>, s: &'s str) -> Result<&'s str, HostError> {
    let s = s.strip_prefix("RRULE:").unwrap_or(s);
    let parts_ok = s.split(';').all(|part| {
        part.split_once('=').is_some_and(|(name, value)| {
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-')
                && !value.is_empty()
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b',' | b'-' | b'+'))
        })
    });
    if parts_ok && s.split(';').any(|p| p.starts_with("FREQ=")) {
        Ok(s)
    } else {
        Err(o.error(
            "recurrenceRule",
            "must be an RRULE value such as FREQ=WEEKLY;BYDAY=MO;COUNT=5",
        ))
    }
}

/// The output: CRLF lines folded at 75 octets.
#[derive(Default)]
struct Writer {
    text: String,
}

impl Writer {
    fn line(&mut self, line: &str) {
        let mut limit = 75;
        let mut rest = line;
        while rest.len() > limit {
            let mut cut = limit;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            self.text.push_str(&rest[..cut]);
            self.text.push_str("\r\n ");
            rest = &rest[cut..];
            // A continuation's leading space counts toward its 75.
            limit = 74;
        }
        self.text.push_str(rest);
        self.text.push_str("\r\n");
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// 21 random characters of nanoid's URL-safe alphabet.
fn random_uid() -> String {
    const ALPHABET: &[u8; 64] = b"useandom-26T198340PX75pxJACKVERYMINDBUSHWOLF_GQZbfghjklqvwyzrict";
    let mut bytes = [0u8; 21];
    if getrandom::fill(&mut bytes).is_err() {
        // No entropy source: the clock still makes the id unique per call in practice.
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (ns >> ((i % 16) * 8)) as u8 ^ (i as u8).wrapping_mul(37);
        }
    }
    bytes
        .iter()
        .map(|b| ALPHABET[(b & 63) as usize] as char)
        .collect()
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value a test needs from a result or an option, or a panic saying what was there.
    trait Must<T> {
        fn must(self, what: &str) -> T;
    }

    impl<T, E: std::fmt::Debug> Must<T> for Result<T, E> {
        fn must(self, what: &str) -> T {
            self.unwrap_or_else(|e| panic!("{what}: {e:?}"))
        }
    }

    impl<T> Must<T> for Option<T> {
        fn must(self, what: &str) -> T {
            self.unwrap_or_else(|| panic!("{what}: nothing"))
        }
    }

    fn obj(members: &[(&str, Value)]) -> Value {
        Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }
    fn n(x: f64) -> Value {
        Value::Number(x)
    }
    fn s(x: &str) -> Value {
        Value::String(x.into())
    }
    fn arr(xs: &[f64]) -> Value {
        Value::Array(xs.iter().map(|x| n(*x)).collect())
    }
    fn one(event: Value) -> Result<String, HostError> {
        create_event(&[event]).map(|v| match v {
            Value::String(s) => s,
            _ => unreachable!(),
        })
    }

    #[test]
    fn an_event_in_the_library_order() {
        let text = one(obj(&[
            ("start", arr(&[2024, 5, 1, 9, 30].map(f64::from))),
            ("duration", obj(&[("hours", n(1.0)), ("minutes", n(30.0))])),
            ("title", s("Stand-up, daily; \\ team")),
            ("uid", s("abc")),
            ("timestamp", n(0.0)),
        ]))
        .must("a value");
        assert_eq!(
            text,
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nCALSCALE:GREGORIAN\r\nPRODID:adamgibbons/ics\r\nMETHOD:PUBLISH\r\nX-PUBLISHED-TTL:PT1H\r\nBEGIN:VEVENT\r\nUID:abc\r\nSUMMARY:Stand-up\\, daily\\; \\\\ team\r\nDTSTAMP:19700101T000000Z\r\nDTSTART:20240501T093000Z\r\nDURATION:PT1H30M\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        );
    }

    #[test]
    fn folding_counts_octets_and_keeps_characters_whole() {
        let mut w = Writer::default();
        let line = format!("DESCRIPTION:{}", "é".repeat(100));
        w.line(&line);
        for l in w.text.split("\r\n").filter(|l| !l.is_empty()) {
            assert!(l.len() <= 75, "{} octets", l.len());
        }
        let unfolded = w.text.replace("\r\n ", "");
        assert_eq!(unfolded, format!("{line}\r\n"));
    }

    #[test]
    fn dates_normalize_like_javascript() {
        let e = |start: Value| {
            one(obj(&[
                ("start", start),
                ("uid", s("u")),
                ("timestamp", n(0.0)),
            ]))
            .must("a value")
        };
        assert!(e(arr(&[2024.0, 1.0, 31.0, 23.0, 60.0])).contains("DTSTART:20240201T000000Z"));
        assert!(e(arr(&[2024.0, 2.0, 29.0])).contains("DTSTART;VALUE=DATE:20240229"));
        assert!(e(s("2024-05-01T09:30:00+02:00")).contains("DTSTART:20240501T073000Z"));
        assert!(e(s("20240501T093000")).contains("DTSTART:20240501T093000\r\n"));
        assert!(e(n(1_714_555_800_000.0)).contains("DTSTART:20240501T093000Z"));
        for bad in [
            arr(&[2023.0, 2.0, 29.0]),
            arr(&[2024.0, 13.0, 1.0]),
            s("tomorrow"),
            n(-1.0),
        ] {
            let err = one(obj(&[("start", bad)])).err().must("an error");
            assert!(err.message().starts_with("ics.createEvent: start"), "{err}");
        }
    }

    #[test]
    fn durations_are_rfc_5545() {
        let d = |members: &[(&str, Value)], signed| {
            let o = Obj {
                at: "ics.createEvent",
                path: String::new(),
                members: &[],
            };
            duration_of(&o, "duration", &obj(members), signed).must("a value")
        };
        assert_eq!(d(&[("days", n(1.0))], false), "P1D");
        assert_eq!(d(&[("weeks", n(2.0))], false), "P2W");
        assert_eq!(d(&[("weeks", n(1.0)), ("hours", n(2.0))], false), "P7DT2H");
        assert_eq!(d(&[], false), "PT0S");
        assert_eq!(
            d(&[("minutes", n(15.0)), ("before", Value::Bool(true))], true),
            "-PT15M"
        );
    }

    #[test]
    fn refusals_name_the_field() {
        let base = |extra: (&str, Value)| {
            one(obj(&[("start", arr(&[2024.0, 1.0, 1.0])), extra]))
                .err()
                .must("an error")
                .into_message()
        };
        assert_eq!(
            base(("colour", s("red"))),
            "ics.createEvent: the event has an unknown field \"colour\""
        );
        assert!(
            base(("duration", obj(&[("hours", n(1.5))])))
                .contains("duration.hours must be a whole number")
        );
        assert!(
            base(("attendees", Value::Array(vec![obj(&[("name", s("A"))])])))
                .contains("attendees[0].email is required")
        );
        assert!(base(("url", s("not a url"))).contains("url must be a URL"));
        assert!(
            base(("timestamp", arr(&[2024.0, 1.0, 1.0])))
                .contains("timestamp must be a date-time, not a date")
        );
        assert!(
            create_events(&[Value::Array(vec![])])
                .err()
                .must("an error")
                .message()
                .contains("non-empty array")
        );
    }

    #[test]
    fn dates_round_trip_through_the_day_count() {
        for z in [-719_468, -1, 0, 1, 19_000, 2_932_896] {
            let (y, m, d) = civil_from_days(z);
            assert_eq!(days_from_civil(y, m, d), z);
        }
    }
}
