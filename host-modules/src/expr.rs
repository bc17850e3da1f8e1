//! `expr`: safe evaluation of expr-eval's expression language (expr-eval 2.0, the reference's
//! library, with the default `new Parser()` options it uses: every operator enabled).
//!
//! The language: numbers (`1.5e3`, `0x1f`, `0b101`), strings (`'...'`, `"..."` with JSON's
//! escapes), `true`/`false`, `PI`, `E`; `+ - * / % ^` (`^` right-associative, binding tighter
//! than a prefix `-`: `-2^2` is -4), postfix `!` (factorial, through the gamma function),
//! `||` (string or array concatenation), `== != < <= > >=` (strict, as JavaScript's `===`),
//! `and`, `or`, `not`, `x in array`, `c ? a : b`; arrays `[1, 2]` with `a[i]`, members
//! `obj.key`; prefix functions (`sin x` or `sin(x)`: sin cos tan asin acos atan sinh cosh tanh
//! asinh acosh atanh sqrt cbrt log ln log2 log10 lg expm1 log1p abs ceil floor round trunc
//! exp sign length); functions random fac min max hypot pyt pow atan2 if gamma roundTo map
//! fold filter indexOf join; assignment `x = 3`, definitions `f(x) = x * 2`, and `;` between
//! statements (the last one's value is the result). Values are JavaScript's, with its
//! conversions (`"3" + 1` is 4, `"a" || 1` is "a1").
//!
//! What it never does: read anything but the variables it is given (their own keys only:
//! `constructor` and `__proto__` are names like any other, never a prototype's members), call
//! anything but the functions above and those the expression defines, or run past its caps.
//!
//! Caps: [`MAX_EXPRESSION_CHARS`] characters, [`MAX_DEPTH`] levels of nesting (parentheses,
//! prefix operators, `^`, calls), [`MAX_FRAMES`] evaluation frames (a recursive function's
//! levels), both counted explicitly so the Rust stack never decides, [`MAX_STEPS`]
//! evaluation steps, [`MAX_VARIABLES`] variables, [`MAX_VALUE_BYTES`] per string or array made,
//! [`MAX_ALLOCATED_BYTES`] of strings and arrays made over the call, and the run's deadline.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use nodetool_protocol::value::Value;

use crate::error::{HostError, HostErrorCode};
use crate::limits::{js_number, js_to_number, require_text};

/// Characters of one expression.
pub const MAX_EXPRESSION_CHARS: usize = 100_000;
/// Nesting of the expression, and of calls while it runs.
pub const MAX_DEPTH: usize = 100;
/// Evaluation frames open at once (a user function's recursion counts each of its levels): an
/// unoptimized build's evaluator takes about 8 KiB of stack per frame, so 400 are about 3 MiB of
/// the evaluation thread's [`EVAL_STACK_BYTES`].
pub const MAX_FRAMES: usize = 400;
/// Evaluation steps (each operator, call, and element a map, fold or filter visits).
pub const MAX_STEPS: u64 = 1_000_000;
/// Variables passed in.
pub const MAX_VARIABLES: usize = 10_000;
/// Bytes of one string or array made (8 per array element).
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// Bytes of the strings and arrays made over one call.
pub const MAX_ALLOCATED_BYTES: usize = 64 << 20;

const AT: &str = "expr.evaluate";

/// The stack of the thread a formula is parsed and evaluated on: the caps above bound the
/// recursion, and an unoptimized build needs about 2 MiB at the caps (more than a host call's
/// thread has), so the work gets 8 times that on a thread of its own.
const EVAL_STACK_BYTES: usize = 16 << 20;

/// `evaluate(formula, variables?)` -> the value.
pub fn evaluate(args: &[Value]) -> Result<Value, HostError> {
    let formula = require_text(AT, args.first(), "formula")?;
    if formula.len() > MAX_EXPRESSION_CHARS && formula.chars().count() > MAX_EXPRESSION_CHARS {
        return Err(HostError::limit(format!(
            "{AT}: the formula is longer than {MAX_EXPRESSION_CHARS} characters"
        )));
    }
    let variables = match args.get(1) {
        Some(Value::Object(members)) => members.as_slice(),
        _ => &[],
    };
    if variables.len() > MAX_VARIABLES {
        return Err(HostError::limit(format!(
            "{AT}: {} variables is more than the {MAX_VARIABLES} variable limit",
            variables.len()
        )));
    }
    let deadline = crate::call_deadline();
    let failed = || {
        HostError::new(
            HostErrorCode::Internal,
            format!("{AT}: the evaluation failed unexpectedly"),
        )
    };
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("expr".into())
            .stack_size(EVAL_STACK_BYTES)
            .spawn_scoped(s, || run(formula, variables, deadline))
            .map_err(|_| failed())?
            .join()
            .unwrap_or_else(|_| Err(failed()))
    })
}

/// Parses and evaluates `formula` over `variables`.
fn run(
    formula: &str,
    variables: &[(String, Value)],
    deadline: Option<std::time::Instant>,
) -> Result<Value, HostError> {
    let scope: HashMap<String, V> = variables
        .iter()
        .map(|(k, v)| (k.clone(), V::from_value(v, 0)))
        .collect();
    let program = Parser::new(formula)?.program()?;
    let mut machine = Machine {
        steps: 0,
        frames: 0,
        allocated: 0,
        depth: 0,
        deadline,
    };
    let scope = Rc::new(RefCell::new(scope));
    let result = machine.eval(&program, &scope)?;
    to_value(&result, 0)
}

// ---------------------------------------------------------------------------------------------
// Values

#[derive(Clone)]
enum V {
    Undefined,
    Null,
    Bool(bool),
    Num(f64),
    Str(Rc<str>),
    Array(Rc<Vec<V>>),
    Object(Rc<Vec<(String, V)>>),
    Builtin(&'static str),
    User(Rc<UserFn>),
}

struct UserFn {
    name: String,
    params: Vec<String>,
    body: Rc<Node>,
    scope: Scope,
}

type Scope = Rc<RefCell<HashMap<String, V>>>;

impl V {
    fn from_value(v: &Value, depth: usize) -> V {
        if depth > 64 {
            return V::Undefined;
        }
        match v {
            Value::Undefined => V::Undefined,
            Value::Null => V::Null,
            Value::Bool(b) => V::Bool(*b),
            Value::Number(n) => V::Num(*n),
            Value::String(s) => V::Str(s.as_str().into()),
            Value::Bytes(b) => V::Array(Rc::new(b.iter().map(|x| V::Num(f64::from(*x))).collect())),
            Value::Array(items) => V::Array(Rc::new(
                items.iter().map(|x| V::from_value(x, depth + 1)).collect(),
            )),
            Value::Object(members) => V::Object(Rc::new(
                members
                    .iter()
                    .map(|(k, x)| (k.clone(), V::from_value(x, depth + 1)))
                    .collect(),
            )),
        }
    }

    fn truthy(&self) -> bool {
        match self {
            V::Undefined | V::Null => false,
            V::Bool(b) => *b,
            V::Num(n) => *n != 0.0 && !n.is_nan(),
            V::Str(s) => !s.is_empty(),
            _ => true,
        }
    }

    fn is_function(&self) -> bool {
        matches!(self, V::Builtin(_) | V::User(_))
    }
}

fn to_value(v: &V, depth: usize) -> Result<Value, HostError> {
    if depth > 64 {
        return Err(HostError::limit(format!(
            "{AT}: the result nests deeper than 64 levels"
        )));
    }
    Ok(match v {
        V::Undefined => Value::Undefined,
        V::Null => Value::Null,
        V::Bool(b) => Value::Bool(*b),
        // expr-eval answers 0 for -0.
        V::Num(n) => Value::Number(if *n == 0.0 { 0.0 } else { *n }),
        V::Str(s) => Value::String(s.to_string()),
        V::Array(items) => Value::Array(
            items
                .iter()
                .map(|x| to_value(x, depth + 1))
                .collect::<Result<_, _>>()?,
        ),
        V::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, x)| Ok((k.clone(), to_value(x, depth + 1)?)))
                .collect::<Result<_, HostError>>()?,
        ),
        V::Builtin(_) | V::User(_) => {
            return Err(HostError::invalid(format!(
                "{AT}: the result is a function, which cannot be returned (call it)"
            )));
        }
    })
}

/// JavaScript's `ToNumber` (arrays and objects through their string form).
fn num(v: &V) -> f64 {
    match v {
        V::Undefined => f64::NAN,
        V::Null => 0.0,
        V::Bool(b) => f64::from(u8::from(*b)),
        V::Num(n) => *n,
        V::Str(s) => js_to_number(&Value::String(s.to_string())),
        V::Array(_) => js_to_number(&Value::String(string_of(v))),
        _ => f64::NAN,
    }
}

/// JavaScript's `String(v)`.
fn string_of(v: &V) -> String {
    match v {
        V::Undefined => "undefined".into(),
        V::Null => "null".into(),
        V::Bool(b) => b.to_string(),
        V::Num(n) => js_number(*n),
        V::Str(s) => s.to_string(),
        V::Array(items) => items
            .iter()
            .map(|x| match x {
                V::Undefined | V::Null => String::new(),
                x => string_of(x),
            })
            .collect::<Vec<_>>()
            .join(","),
        V::Object(_) => "[object Object]".into(),
        V::Builtin(name) => format!("function {name}() {{ [native code] }}"),
        V::User(f) => format!("function {}()", f.name),
    }
}

/// `===`.
fn strict_eq(a: &V, b: &V) -> bool {
    match (a, b) {
        (V::Undefined, V::Undefined) | (V::Null, V::Null) => true,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::Num(x), V::Num(y)) => x == y,
        (V::Str(x), V::Str(y)) => x == y,
        (V::Array(x), V::Array(y)) => Rc::ptr_eq(x, y),
        (V::Object(x), V::Object(y)) => Rc::ptr_eq(x, y),
        (V::Builtin(x), V::Builtin(y)) => x == y,
        (V::User(x), V::User(y)) => Rc::ptr_eq(x, y),
        _ => false,
    }
}

/// JavaScript's `a < b` (`None` when either side is NaN).
fn less(a: &V, b: &V) -> Option<bool> {
    let prim = |v: &V| match v {
        V::Array(_) | V::Object(_) | V::Builtin(_) | V::User(_) => V::Str(string_of(v).into()),
        v => v.clone(),
    };
    let (a, b) = (prim(a), prim(b));
    if let (V::Str(x), V::Str(y)) = (&a, &b) {
        return Some(x.encode_utf16().lt(y.encode_utf16()));
    }
    let (x, y) = (num(&a), num(&b));
    if x.is_nan() || y.is_nan() {
        None
    } else {
        Some(x < y)
    }
}

/// JavaScript's `Math.pow`, whose NaN cases differ from `powf`.
fn pow(x: f64, y: f64) -> f64 {
    if y.is_nan() || (x.abs() == 1.0 && y.is_infinite()) {
        f64::NAN
    } else {
        x.powf(y)
    }
}

fn js_round(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let f = x.floor();
    let r = if x - f >= 0.5 { f + 1.0 } else { f };
    if r == 0.0 && x < 0.0 { -0.0 } else { r }
}

/// The gamma function as expr-eval computes it (math.js's Lanczos approximation).
fn gamma(n: f64) -> f64 {
    gamma_of(n, true)
}

/// expr-eval's `gamma` of a value: its integer shortcut applies only to a number (`isInteger`
/// compares with `===`), so `gamma(true)` takes the approximation, as there.
fn gamma_value(v: &V) -> f64 {
    gamma_of(num(v), matches!(v, V::Num(_)))
}

/// expr-eval's factorial `gamma(a + 1)`, with JavaScript's `+`: a string (or an array) and 1
/// concatenate (`"3"!` is gamma of 31).
fn factorial_value(v: &V) -> f64 {
    match v {
        V::Str(_) | V::Array(_) | V::Object(_) | V::Builtin(_) | V::User(_) => {
            let text = format!("{}1", string_of(v));
            gamma_of(js_to_number(&Value::String(text)), false)
        }
        v => gamma_of(num(v) + 1.0, true),
    }
}

fn gamma_of(n: f64, number: bool) -> f64 {
    const G: f64 = 4.742_187_5;
    // math.js's coefficients as expr-eval writes them (parsed to the same doubles).
    #[allow(clippy::excessive_precision)]
    const P: [f64; 15] = [
        0.999_999_999_999_997_1,
        57.156_235_665_862_92,
        -59.597_960_355_475_49,
        14.136_097_974_741_746,
        -0.491_913_816_097_620_2,
        0.339_946_499_848_118_9e-4,
        0.465_236_289_270_485_76e-4,
        -0.983_744_753_048_795_6e-4,
        0.158_088_703_224_912_5e-3,
        -0.210_264_441_724_104_9e-3,
        0.217_439_618_115_212_64e-3,
        -0.164_318_106_536_763_9e-3,
        0.844_182_239_838_527_4e-4,
        -0.261_908_384_015_814_1e-4,
        0.368_991_826_595_316_2e-5,
    ];
    if number && n.is_finite() && n == n.round() {
        if n <= 0.0 {
            return f64::INFINITY;
        }
        if n > 171.0 {
            return f64::INFINITY;
        }
        let (mut value, mut res) = (n - 2.0, n - 1.0);
        while value > 1.0 {
            res *= value;
            value -= 1.0;
        }
        return if res == 0.0 { 1.0 } else { res };
    }
    if n.is_infinite() && n < 0.0 {
        return f64::NAN;
    }
    if n < 0.5 {
        return std::f64::consts::PI
            / ((std::f64::consts::PI * n).sin() * gamma_of(1.0 - n, number));
    }
    if n >= 171.35 {
        return f64::INFINITY;
    }
    if n > 85.0 {
        let two = n * n;
        let three = two * n;
        let four = three * n;
        let five = four * n;
        return (2.0 * std::f64::consts::PI / n).sqrt()
            * pow(n / std::f64::consts::E, n)
            * (1.0 + 1.0 / (12.0 * n) + 1.0 / (288.0 * two)
                - 139.0 / (51840.0 * three)
                - 571.0 / (2_488_320.0 * four)
                + 163_879.0 / (209_018_880.0 * five)
                + 5_246_819.0 / (75_246_796_800.0 * five * n));
    }
    let n = n - 1.0;
    let mut x = P[0];
    for (i, p) in P.iter().enumerate().skip(1) {
        x += p / (n + i as f64);
    }
    let t = n + G + 0.5;
    (2.0 * std::f64::consts::PI).sqrt() * pow(t, n + 0.5) * (-t).exp() * x
}

/// expr-eval's `roundTo(value, exp)`: decimal rounding through the number's text.
fn round_to(value: f64, exp: Option<f64>) -> f64 {
    let exp = match exp {
        None | Some(0.0) => return js_round(value),
        Some(e) => -e,
    };
    if value.is_nan() || exp.fract() != 0.0 {
        return f64::NAN;
    }
    let shift = |v: f64, by: f64| -> f64 {
        let text = js_number(v);
        let (mantissa, e) = match text.split_once('e') {
            Some((m, e)) => (m.to_string(), e.parse::<f64>().unwrap_or(0.0)),
            None => (text, 0.0),
        };
        format!("{mantissa}e{}", js_number(e + by))
            .parse::<f64>()
            .unwrap_or(f64::NAN)
    };
    let shifted = js_round(shift(value, -exp));
    shift(shifted, exp)
}

fn random_unit() -> f64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return 0.5;
    }
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

const UNARY: &[&str] = &[
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "sqrt", "cbrt", "log", "log2", "ln", "lg", "log10", "expm1", "log1p", "abs", "ceil", "floor",
    "round", "trunc", "-", "+", "exp", "not", "length", "!", "sign",
];
const FUNCTIONS: &[&str] = &[
    "random", "fac", "min", "max", "hypot", "pyt", "pow", "atan2", "if", "gamma", "roundTo", "map",
    "fold", "filter", "indexOf", "join",
];
const BINARY_NAMED: &[&str] = &["and", "or", "in"];

fn unary_math(name: &str, x: f64) -> f64 {
    match name {
        "sin" => x.sin(),
        "cos" => x.cos(),
        "tan" => x.tan(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "atan" => x.atan(),
        "sinh" => x.sinh(),
        "cosh" => x.cosh(),
        "tanh" => x.tanh(),
        "asinh" => x.asinh(),
        "acosh" => x.acosh(),
        "atanh" => x.atanh(),
        "sqrt" => x.sqrt(),
        "cbrt" => x.cbrt(),
        "log" | "ln" => x.ln(),
        "log2" => x.log2(),
        "lg" | "log10" => x.log10(),
        "expm1" => x.exp_m1(),
        "log1p" => x.ln_1p(),
        "abs" => x.abs(),
        "ceil" => x.ceil(),
        "floor" => x.floor(),
        "round" => js_round(x),
        "trunc" => x.trunc(),
        "-" => -x,
        "+" => x,
        "exp" => x.exp(),
        "!" => gamma(x + 1.0),
        "sign" => {
            if x.is_nan() || x == 0.0 {
                x
            } else {
                x.signum()
            }
        }
        _ => f64::NAN,
    }
}

// ---------------------------------------------------------------------------------------------
// Syntax

enum Node {
    Lit(V),
    Var(String),
    Unary(&'static str, Box<Node>),
    Binary(&'static str, Box<Node>, Box<Node>),
    /// A left-associative run (`a + b - c`, `a and b and c`), evaluated in a loop so a long
    /// one costs no recursion.
    Chain(Box<Node>, Vec<(&'static str, Node)>),
    Cond(Box<Node>, Box<Node>, Box<Node>),
    Assign(String, Box<Node>),
    Define(String, Vec<String>, Rc<Node>),
    Call(Box<Node>, Vec<Node>),
    Member(Box<Node>, String),
    Index(Box<Node>, Box<Node>),
    Array(Vec<Node>),
    /// Statements separated by `;`: each runs, the last one's value is the result.
    Seq(Vec<Node>),
}

#[derive(Clone, PartialEq, Debug)]
enum Tok {
    Num(f64),
    Bool(bool),
    Str(String),
    Op(&'static str),
    Name(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Semi,
    Eof,
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    depth: usize,
}

fn perr(message: impl std::fmt::Display) -> HostError {
    HostError::malformed(format!("{AT}: parse error: {message}"))
}

/// A letter as expr-eval tells one (a character with distinct upper and lower case).
fn is_letter(c: char) -> bool {
    c.is_alphabetic() && !c.to_lowercase().eq(c.to_uppercase())
}

fn lex(src: &str) -> Result<Vec<(Tok, usize)>, HostError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            let mut j = i + 2;
            while j + 1 < chars.len() && !(chars[j] == '*' && chars[j + 1] == '/') {
                j += 1;
            }
            i = if j + 1 < chars.len() {
                j + 2
            } else {
                chars.len()
            };
            continue;
        }
        // Radix integers.
        if c == '0' && i + 2 < chars.len() && matches!(chars[i + 1], 'x' | 'b') {
            let radix = if chars[i + 1] == 'x' { 16 } else { 2 };
            let mut j = i + 2;
            while j < chars.len() && chars[j].is_digit(radix) {
                j += 1;
            }
            if j > i + 2 {
                let digits: String = chars[i + 2..j].iter().collect();
                let n = digits.chars().fold(0f64, |acc, d| {
                    acc * f64::from(radix) + f64::from(d.to_digit(radix).unwrap_or(0))
                });
                out.push((Tok::Num(n), start));
                i = j;
                continue;
            }
        }
        // Numbers: digits with at most one dot, an optional exponent.
        if c.is_ascii_digit() || c == '.' {
            let mut j = i;
            let (mut dot, mut digits) = (false, false);
            while j < chars.len() && (chars[j].is_ascii_digit() || (!dot && chars[j] == '.')) {
                if chars[j] == '.' {
                    dot = true;
                } else {
                    digits = true;
                }
                j += 1;
            }
            if digits {
                let mut end = j;
                if j < chars.len() && matches!(chars[j], 'e' | 'E') {
                    let mut k = j + 1;
                    if k < chars.len() && matches!(chars[k], '+' | '-') {
                        k += 1;
                    }
                    let d0 = k;
                    while k < chars.len() && chars[k].is_ascii_digit() {
                        k += 1;
                    }
                    if k > d0 {
                        end = k;
                    }
                }
                let text: String = chars[i..end].iter().collect();
                let text = if text.ends_with('.') {
                    format!("{text}0")
                } else {
                    text
                };
                let text = if text.starts_with('.') {
                    format!("0{text}")
                } else {
                    text
                };
                out.push((
                    Tok::Num(text.parse().map_err(|_| perr("bad number"))?),
                    start,
                ));
                i = end;
                continue;
            }
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let op: Option<(&'static str, usize)> = match (c, two.as_str()) {
            (_, ">=") => Some((">=", 2)),
            (_, "<=") => Some(("<=", 2)),
            (_, "==") => Some(("==", 2)),
            (_, "!=") => Some(("!=", 2)),
            (_, "||") => Some(("||", 2)),
            ('+', _) => Some(("+", 1)),
            ('-', _) => Some(("-", 1)),
            ('*' | '∙' | '•', _) => Some(("*", 1)),
            ('/', _) => Some(("/", 1)),
            ('%', _) => Some(("%", 1)),
            ('^', _) => Some(("^", 1)),
            ('?', _) => Some(("?", 1)),
            (':', _) => Some((":", 1)),
            ('.', _) => Some((".", 1)),
            ('>', _) => Some((">", 1)),
            ('<', _) => Some(("<", 1)),
            ('=', _) => Some(("=", 1)),
            ('!', _) => Some(("!", 1)),
            _ => None,
        };
        if let Some((op, n)) = op {
            out.push((Tok::Op(op), start));
            i += n;
            continue;
        }
        if c == '\'' || c == '"' {
            // The closing quote is the first one not preceded by a backslash.
            let mut j = i + 1;
            loop {
                match chars[j..].iter().position(|&x| x == c) {
                    None => return Err(perr(format!("unterminated string at {}", start + 1))),
                    Some(k) => {
                        let at = j + k;
                        if chars[at - 1] != '\\' {
                            let raw: String = chars[i + 1..at].iter().collect();
                            out.push((Tok::Str(unescape(&raw)?), start));
                            i = at + 1;
                            break;
                        }
                        j = at + 1;
                    }
                }
            }
            continue;
        }
        let simple = match c {
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            '[' => Some(Tok::LBracket),
            ']' => Some(Tok::RBracket),
            ',' => Some(Tok::Comma),
            ';' => Some(Tok::Semi),
            _ => None,
        };
        if let Some(t) = simple {
            out.push((t, start));
            i += 1;
            continue;
        }
        // Names, named operators and constants.
        if is_letter(c) || c == '_' || c == '$' {
            let mut j = i + 1;
            let has_letter = c != '$';
            while j < chars.len()
                && (is_letter(chars[j]) || chars[j] == '_' || chars[j].is_ascii_digit())
            {
                j += 1;
            }
            if !has_letter && j == i + 1 {
                return Err(perr(format!("unknown character \"{c}\"")));
            }
            let word: String = chars[i..j].iter().collect();
            let tok = match word.as_str() {
                "true" => Tok::Bool(true),
                "false" => Tok::Bool(false),
                "PI" => Tok::Num(std::f64::consts::PI),
                "E" => Tok::Num(std::f64::consts::E),
                w => match UNARY.iter().chain(BINARY_NAMED).find(|op| **op == w) {
                    Some(op) => Tok::Op(op),
                    None => Tok::Name(word),
                },
            };
            out.push((tok, start));
            i = j;
            continue;
        }
        return Err(perr(format!("unknown character \"{c}\" at {}", start + 1)));
    }
    out.push((Tok::Eof, chars.len()));
    Ok(out)
}

fn unescape(raw: &str) -> Result<String, HostError> {
    let mut out = String::with_capacity(raw.len());
    let mut it = raw.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('\'') => out.push('\''),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some('u') => {
                let hex: String = it.by_ref().take(4).collect();
                let code = (hex.len() == 4)
                    .then(|| u32::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or_else(|| perr(format!("illegal escape sequence: \\u{hex}")))?;
                // A lone surrogate cannot be a Rust string's; it becomes U+FFFD.
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
            }
            other => {
                return Err(perr(format!(
                    "illegal escape sequence: \"\\{}\"",
                    other.map(String::from).unwrap_or_default()
                )));
            }
        }
    }
    Ok(out)
}

impl Parser {
    fn new(src: &str) -> Result<Parser, HostError> {
        Ok(Parser {
            toks: lex(src)?,
            pos: 0,
            depth: 0,
        })
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos.min(self.toks.len() - 1)].0
    }

    fn peek2(&self) -> &Tok {
        &self.toks[(self.pos + 1).min(self.toks.len() - 1)].0
    }

    fn bump(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn accept(&mut self, t: &Tok) -> bool {
        if self.peek() == t {
            self.bump();
            true
        } else {
            false
        }
    }

    fn accept_op(&mut self, ops: &[&str]) -> Option<&'static str> {
        if let Tok::Op(op) = self.peek()
            && ops.contains(op)
        {
            let op = *op;
            self.bump();
            return Some(op);
        }
        None
    }

    fn expect(&mut self, t: &Tok, what: &str) -> Result<(), HostError> {
        if self.accept(t) {
            Ok(())
        } else {
            Err(perr(format!(
                "expected {what} at {}",
                self.toks[self.pos.min(self.toks.len() - 1)].1 + 1
            )))
        }
    }

    /// Enters one level of nesting.
    fn enter(&mut self) -> Result<(), HostError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(HostError::limit(format!(
                "{AT}: the formula nests deeper than {MAX_DEPTH} levels"
            )));
        }
        Ok(())
    }

    fn program(&mut self) -> Result<Node, HostError> {
        let node = self.expression()?;
        if *self.peek() != Tok::Eof {
            return Err(perr(format!(
                "expected EOF at {}",
                self.toks[self.pos].1 + 1
            )));
        }
        Ok(node)
    }

    fn expression(&mut self) -> Result<Node, HostError> {
        self.enter()?;
        let mut statements = Vec::new();
        loop {
            if matches!(self.peek(), Tok::Eof | Tok::RParen) && !statements.is_empty() {
                break;
            }
            statements.push(self.assignment()?);
            if !self.accept(&Tok::Semi) {
                break;
            }
            if matches!(self.peek(), Tok::Eof | Tok::RParen) {
                break;
            }
        }
        self.depth -= 1;
        Ok(if statements.len() == 1 {
            statements.pop().unwrap_or(Node::Lit(V::Undefined))
        } else {
            Node::Seq(statements)
        })
    }

    fn assignment(&mut self) -> Result<Node, HostError> {
        let target = self.conditional()?;
        if self.accept_op(&["="]).is_none() {
            return Ok(target);
        }
        self.enter()?;
        let value = self.assignment()?;
        self.depth -= 1;
        match target {
            Node::Var(name) => Ok(Node::Assign(name, Box::new(value))),
            // expr-eval assigns `a.b = v` to the variable `b`.
            Node::Member(_, name) => Ok(Node::Assign(name, Box::new(value))),
            Node::Call(callee, args) => {
                let Node::Var(name) = *callee else {
                    return Err(perr("expected a function name to define"));
                };
                let params = args
                    .into_iter()
                    .map(|a| match a {
                        Node::Var(p) => Ok(p),
                        _ => Err(perr("a function's parameters must be names")),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Node::Define(name, params, Rc::new(value)))
            }
            _ => Err(perr("expected variable for assignment")),
        }
    }

    fn conditional(&mut self) -> Result<Node, HostError> {
        let cond = self.or()?;
        if self.accept_op(&["?"]).is_none() {
            return Ok(cond);
        }
        self.enter()?;
        let yes = self.conditional()?;
        if self.accept_op(&[":"]).is_none() {
            return Err(perr("expected :"));
        }
        let no = self.conditional()?;
        self.depth -= 1;
        Ok(Node::Cond(Box::new(cond), Box::new(yes), Box::new(no)))
    }

    fn or(&mut self) -> Result<Node, HostError> {
        let first = self.and()?;
        let mut rest = Vec::new();
        while let Some(op) = self.accept_op(&["or"]) {
            rest.push((op, self.and()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Node::Chain(Box::new(first), rest)
        })
    }

    fn and(&mut self) -> Result<Node, HostError> {
        let first = self.comparison()?;
        let mut rest = Vec::new();
        while let Some(op) = self.accept_op(&["and"]) {
            rest.push((op, self.comparison()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Node::Chain(Box::new(first), rest)
        })
    }

    fn comparison(&mut self) -> Result<Node, HostError> {
        let first = self.add_sub()?;
        let mut rest = Vec::new();
        while let Some(op) = self.accept_op(&["==", "!=", "<", "<=", ">=", ">", "in"]) {
            rest.push((op, self.add_sub()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Node::Chain(Box::new(first), rest)
        })
    }

    fn add_sub(&mut self) -> Result<Node, HostError> {
        let first = self.term()?;
        let mut rest = Vec::new();
        while let Some(op) = self.accept_op(&["+", "-", "||"]) {
            rest.push((op, self.term()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Node::Chain(Box::new(first), rest)
        })
    }

    fn term(&mut self) -> Result<Node, HostError> {
        let first = self.factor()?;
        let mut rest = Vec::new();
        while let Some(op) = self.accept_op(&["*", "/", "%"]) {
            rest.push((op, self.factor()?));
        }
        Ok(if rest.is_empty() {
            first
        } else {
            Node::Chain(Box::new(first), rest)
        })
    }

    fn factor(&mut self) -> Result<Node, HostError> {
        if let Tok::Op(op) = self.peek().clone()
            && UNARY.contains(&op)
        {
            if op != "-" && op != "+" {
                match self.peek2() {
                    Tok::LParen => return self.exponential(),
                    Tok::Semi | Tok::Comma | Tok::Eof | Tok::RParen => return self.atom(),
                    _ => {}
                }
            }
            self.bump();
            self.enter()?;
            let operand = self.factor()?;
            self.depth -= 1;
            return Ok(Node::Unary(op, Box::new(operand)));
        }
        self.exponential()
    }

    fn exponential(&mut self) -> Result<Node, HostError> {
        let mut left = self.postfix()?;
        while self.accept_op(&["^"]).is_some() {
            self.enter()?;
            let right = self.factor()?;
            self.depth -= 1;
            left = Node::Binary("^", Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn postfix(&mut self) -> Result<Node, HostError> {
        let mut node = self.call()?;
        while self.accept_op(&["!"]).is_some() {
            node = Node::Unary("!", Box::new(node));
        }
        Ok(node)
    }

    fn call(&mut self) -> Result<Node, HostError> {
        if let Tok::Op(op) = self.peek().clone()
            && UNARY.contains(&op)
        {
            self.bump();
            let operand = self.atom()?;
            return Ok(Node::Unary(op, Box::new(operand)));
        }
        let mut node = self.member()?;
        while self.accept(&Tok::LParen) {
            let args = self.list(&Tok::RParen)?;
            node = Node::Call(Box::new(node), args);
        }
        Ok(node)
    }

    /// Comma-separated expressions up to `close`.
    fn list(&mut self, close: &Tok) -> Result<Vec<Node>, HostError> {
        let mut items = Vec::new();
        while !self.accept(close) {
            if *self.peek() == Tok::Eof {
                return Err(perr("unexpected end of the formula"));
            }
            items.push(self.expression()?);
            while self.accept(&Tok::Comma) {
                items.push(self.expression()?);
            }
            if *self.peek() != *close {
                return Err(perr(format!(
                    "expected {} at {}",
                    if *close == Tok::RParen { ")" } else { "]" },
                    self.toks[self.pos].1 + 1
                )));
            }
        }
        Ok(items)
    }

    fn member(&mut self) -> Result<Node, HostError> {
        let mut node = self.atom()?;
        loop {
            if self.accept_op(&["."]).is_some() {
                match self.bump() {
                    Tok::Name(name) => node = Node::Member(Box::new(node), name),
                    _ => return Err(perr("expected a name after \".\"")),
                }
            } else if self.accept(&Tok::LBracket) {
                let index = self.expression()?;
                self.expect(&Tok::RBracket, "]")?;
                node = Node::Index(Box::new(node), Box::new(index));
            } else {
                return Ok(node);
            }
        }
    }

    fn atom(&mut self) -> Result<Node, HostError> {
        let at = self.toks[self.pos.min(self.toks.len() - 1)].1 + 1;
        match self.bump() {
            Tok::Bool(b) => Ok(Node::Lit(V::Bool(b))),
            Tok::Name(n) => Ok(Node::Var(n)),
            Tok::Op(op) if UNARY.contains(&op) => Ok(Node::Var(op.to_string())),
            Tok::Num(n) => Ok(Node::Lit(V::Num(n))),
            Tok::Str(s) => Ok(Node::Lit(V::Str(s.into()))),
            // The expression inside counts the level.
            Tok::LParen => {
                let e = self.expression()?;
                self.expect(&Tok::RParen, ")")?;
                Ok(e)
            }
            Tok::LBracket => Ok(Node::Array(self.list(&Tok::RBracket)?)),
            t => Err(perr(format!("unexpected {t:?} at {at}"))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation

struct Machine {
    steps: u64,
    /// Evaluation frames open (calls included): explicit, so the Rust stack never decides.
    frames: usize,
    allocated: usize,
    depth: usize,
    deadline: Option<std::time::Instant>,
}

fn rt(message: impl std::fmt::Display) -> HostError {
    HostError::invalid(format!("{AT}: {message}"))
}

impl Machine {
    fn step(&mut self) -> Result<(), HostError> {
        self.steps += 1;
        if self.steps > MAX_STEPS {
            return Err(HostError::limit(format!(
                "{AT}: the formula took more than {MAX_STEPS} evaluation steps"
            )));
        }
        if self.steps.is_multiple_of(1024)
            && let Some(deadline) = self.deadline
            && std::time::Instant::now() >= deadline
        {
            return Err(HostError::deadline(format!(
                "{AT}: the run's deadline passed while the formula was evaluated"
            )));
        }
        Ok(())
    }

    /// Charges a string or array of `bytes` made.
    fn charge(&mut self, bytes: usize) -> Result<(), HostError> {
        if bytes > MAX_VALUE_BYTES {
            return Err(HostError::output(format!(
                "{AT}: a string or array would exceed {MAX_VALUE_BYTES} bytes"
            )));
        }
        self.allocated += bytes;
        if self.allocated > MAX_ALLOCATED_BYTES {
            return Err(HostError::output(format!(
                "{AT}: the formula made more than {MAX_ALLOCATED_BYTES} bytes of strings and arrays"
            )));
        }
        Ok(())
    }

    fn string(&mut self, s: String) -> Result<V, HostError> {
        self.charge(s.len())?;
        Ok(V::Str(s.into()))
    }

    fn array(&mut self, items: Vec<V>) -> Result<V, HostError> {
        self.charge(items.len() * 8)?;
        Ok(V::Array(Rc::new(items)))
    }

    fn eval(&mut self, node: &Node, scope: &Scope) -> Result<V, HostError> {
        self.step()?;
        self.frames += 1;
        if self.frames > MAX_FRAMES {
            return Err(HostError::limit(format!(
                "{AT}: evaluation nests deeper than {MAX_FRAMES} levels (a recursive function?)"
            )));
        }
        let result = self.eval_node(node, scope);
        self.frames -= 1;
        result
    }

    fn eval_node(&mut self, node: &Node, scope: &Scope) -> Result<V, HostError> {
        Ok(match node {
            Node::Lit(v) => v.clone(),
            Node::Var(name) => self.lookup(name, scope)?,
            Node::Unary(op, operand) => {
                let x = self.eval(operand, scope)?;
                self.unary(op, &x)?
            }
            Node::Binary(op, a, b) => {
                let a = self.eval(a, scope)?;
                let b = self.eval(b, scope)?;
                self.binary(op, &a, &b)?
            }
            Node::Chain(first, rest) => {
                let mut acc = self.eval(first, scope)?;
                for (op, operand) in rest {
                    acc = match *op {
                        "and" => V::Bool(acc.truthy() && self.eval(operand, scope)?.truthy()),
                        "or" => V::Bool(acc.truthy() || self.eval(operand, scope)?.truthy()),
                        op => {
                            let b = self.eval(operand, scope)?;
                            self.binary(op, &acc, &b)?
                        }
                    };
                }
                acc
            }
            Node::Cond(c, yes, no) => {
                if self.eval(c, scope)?.truthy() {
                    self.eval(yes, scope)?
                } else {
                    self.eval(no, scope)?
                }
            }
            Node::Assign(name, value) => {
                let v = self.eval(value, scope)?;
                self.define(scope, name, v.clone())?;
                v
            }
            Node::Define(name, params, body) => {
                let f = V::User(Rc::new(UserFn {
                    name: name.clone(),
                    params: params.clone(),
                    body: body.clone(),
                    scope: scope.clone(),
                }));
                self.define(scope, name, f.clone())?;
                f
            }
            Node::Call(callee, args) => {
                let f = self.eval(callee, scope)?;
                let mut values = Vec::with_capacity(args.len());
                for a in args {
                    values.push(self.eval(a, scope)?);
                }
                self.call(&f, values)?
            }
            Node::Member(object, name) => {
                let o = self.eval(object, scope)?;
                match &o {
                    V::Object(members) => members
                        .iter()
                        .find(|(k, _)| k == name)
                        .map_or(V::Undefined, |(_, v)| v.clone()),
                    V::Array(items) if name == "length" => V::Num(items.len() as f64),
                    V::Str(s) if name == "length" => V::Num(s.encode_utf16().count() as f64),
                    V::Undefined | V::Null => {
                        return Err(rt(format!(
                            "cannot read properties of {} (reading '{name}')",
                            string_of(&o)
                        )));
                    }
                    _ => V::Undefined,
                }
            }
            Node::Index(object, index) => {
                let o = self.eval(object, scope)?;
                let i = self.eval(index, scope)?;
                let i = to_int32(num(&i));
                match &o {
                    V::Array(items) => usize::try_from(i)
                        .ok()
                        .and_then(|i| items.get(i))
                        .cloned()
                        .unwrap_or(V::Undefined),
                    V::Str(s) => match usize::try_from(i)
                        .ok()
                        .and_then(|i| s.encode_utf16().nth(i))
                    {
                        Some(unit) => self.string(String::from_utf16_lossy(&[unit]))?,
                        None => V::Undefined,
                    },
                    V::Undefined | V::Null => {
                        return Err(rt(format!(
                            "cannot read properties of {} (reading '{i}')",
                            string_of(&o)
                        )));
                    }
                    _ => V::Undefined,
                }
            }
            Node::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.eval(item, scope)?);
                }
                self.array(out)?
            }
            Node::Seq(statements) => {
                let mut last = V::Undefined;
                for s in statements {
                    last = self.eval(s, scope)?;
                }
                last
            }
        })
    }

    fn define(&mut self, scope: &Scope, name: &str, v: V) -> Result<(), HostError> {
        let mut s = scope.borrow_mut();
        if !s.contains_key(name) && s.len() >= MAX_VARIABLES * 2 {
            return Err(HostError::limit(format!("{AT}: too many variables")));
        }
        s.insert(name.to_string(), v);
        Ok(())
    }

    fn lookup(&self, name: &str, scope: &Scope) -> Result<V, HostError> {
        if let Some(f) = FUNCTIONS.iter().find(|f| **f == name) {
            return Ok(V::Builtin(f));
        }
        if let Some(f) = UNARY.iter().find(|f| **f == name) {
            return Ok(V::Builtin(f));
        }
        match scope.borrow().get(name) {
            Some(V::Undefined) | None => Err(rt(format!("undefined variable: {name}"))),
            Some(v) => Ok(v.clone()),
        }
    }

    fn unary(&mut self, op: &str, x: &V) -> Result<V, HostError> {
        Ok(match op {
            "not" => V::Bool(!x.truthy()),
            "length" => V::Num(match x {
                V::Array(items) => items.len() as f64,
                x => string_of(x).encode_utf16().count() as f64,
            }),
            "+" => V::Num(num(x)),
            "!" => V::Num(factorial_value(x)),
            op => V::Num(unary_math(op, num(x))),
        })
    }

    fn binary(&mut self, op: &str, a: &V, b: &V) -> Result<V, HostError> {
        Ok(match op {
            "+" => V::Num(num(a) + num(b)),
            "-" => V::Num(num(a) - num(b)),
            "*" => V::Num(num(a) * num(b)),
            "/" => V::Num(num(a) / num(b)),
            "%" => V::Num(num(a) % num(b)),
            "^" => V::Num(pow(num(a), num(b))),
            "||" => match (a, b) {
                (V::Array(x), V::Array(y)) => {
                    let mut items = Vec::with_capacity(x.len() + y.len());
                    items.extend(x.iter().cloned());
                    items.extend(y.iter().cloned());
                    self.array(items)?
                }
                _ => {
                    let (x, y) = (string_of(a), string_of(b));
                    self.charge(x.len() + y.len())?;
                    V::Str(format!("{x}{y}").into())
                }
            },
            "==" => V::Bool(strict_eq(a, b)),
            "!=" => V::Bool(!strict_eq(a, b)),
            "<" => V::Bool(less(a, b) == Some(true)),
            ">" => V::Bool(less(b, a) == Some(true)),
            "<=" => V::Bool(less(b, a) == Some(false)),
            ">=" => V::Bool(less(a, b) == Some(false)),
            "in" => V::Bool(match b {
                V::Array(items) => items.iter().any(|x| strict_eq(x, a)),
                V::Str(s) => match a {
                    V::Str(t) => {
                        let unit: Vec<u16> = t.encode_utf16().collect();
                        unit.len() == 1 && s.encode_utf16().any(|u| u == unit[0])
                    }
                    _ => false,
                },
                V::Undefined | V::Null => {
                    return Err(rt(format!(
                        "cannot read properties of {} (reading 'length')",
                        string_of(b)
                    )));
                }
                _ => false,
            }),
            _ => return Err(rt(format!("unknown operator {op}"))),
        })
    }

    fn call(&mut self, f: &V, args: Vec<V>) -> Result<V, HostError> {
        self.step()?;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(HostError::limit(format!(
                "{AT}: calls nest deeper than {MAX_DEPTH} levels"
            )));
        }
        let result = self.call_inner(f, args);
        self.depth -= 1;
        result
    }

    fn call_inner(&mut self, f: &V, args: Vec<V>) -> Result<V, HostError> {
        let arg = |i: usize| args.get(i).cloned().unwrap_or(V::Undefined);
        let n = |i: usize| num(&arg(i));
        let name = match f {
            V::Builtin(name) => *name,
            V::User(u) => {
                let mut scope = u.scope.borrow().clone();
                for (i, p) in u.params.iter().enumerate() {
                    scope.insert(p.clone(), arg(i));
                }
                let scope = Rc::new(RefCell::new(scope));
                return self.eval(&u.body, &scope);
            }
            other => return Err(rt(format!("{} is not a function", string_of(other)))),
        };
        Ok(match name {
            "random" => {
                let scale = if arg(0).truthy() { n(0) } else { 1.0 };
                V::Num(random_unit() * scale)
            }
            "fac" => V::Num(factorial_value(&arg(0))),
            "min" | "max" => {
                let values: Vec<f64> = match args.as_slice() {
                    [V::Array(items)] => items.iter().map(num).collect(),
                    _ => args.iter().map(num).collect(),
                };
                let mut acc = if name == "min" {
                    f64::INFINITY
                } else {
                    f64::NEG_INFINITY
                };
                for v in values {
                    if v.is_nan() {
                        acc = f64::NAN;
                        break;
                    }
                    acc = if name == "min" {
                        acc.min(v)
                    } else {
                        acc.max(v)
                    };
                }
                V::Num(acc)
            }
            "hypot" | "pyt" => {
                let values: Vec<f64> = args.iter().map(num).collect();
                if values.iter().any(|v| v.is_infinite()) {
                    V::Num(f64::INFINITY)
                } else if values.iter().any(|v| v.is_nan()) {
                    V::Num(f64::NAN)
                } else {
                    V::Num(values.iter().fold(0.0f64, |acc, v| acc.hypot(*v)))
                }
            }
            "pow" => V::Num(pow(n(0), n(1))),
            "atan2" => V::Num(n(0).atan2(n(1))),
            "if" => {
                if arg(0).truthy() {
                    arg(1)
                } else {
                    arg(2)
                }
            }
            "gamma" => V::Num(gamma_value(&arg(0))),
            "roundTo" => V::Num(round_to(n(0), args.get(1).map(num))),
            "map" | "filter" => {
                let (g, a) = (arg(0), arg(1));
                if !g.is_function() {
                    return Err(rt(format!("First argument to {name} is not a function")));
                }
                let V::Array(items) = a else {
                    return Err(rt(format!("Second argument to {name} is not an array")));
                };
                let mut out = Vec::with_capacity(items.len());
                for (i, x) in items.iter().enumerate() {
                    let y = self.call(&g, vec![x.clone(), V::Num(i as f64)])?;
                    if name == "map" {
                        out.push(y);
                    } else if y.truthy() {
                        out.push(x.clone());
                    }
                }
                self.array(out)?
            }
            "fold" => {
                let (g, mut acc, a) = (arg(0), arg(1), arg(2));
                if !g.is_function() {
                    return Err(rt("First argument to fold is not a function"));
                }
                let V::Array(items) = a else {
                    return Err(rt("Second argument to fold is not an array"));
                };
                for (i, x) in items.iter().enumerate() {
                    acc = self.call(&g, vec![acc, x.clone(), V::Num(i as f64)])?;
                }
                acc
            }
            "indexOf" => {
                let (target, s) = (arg(0), arg(1));
                match &s {
                    V::Array(items) => V::Num(
                        items
                            .iter()
                            .position(|x| strict_eq(x, &target))
                            .map_or(-1.0, |i| i as f64),
                    ),
                    V::Str(text) => {
                        let needle: Vec<u16> = string_of(&target).encode_utf16().collect();
                        let hay: Vec<u16> = text.encode_utf16().collect();
                        let found = if needle.is_empty() {
                            Some(0)
                        } else {
                            hay.windows(needle.len())
                                .position(|w| w == needle.as_slice())
                        };
                        V::Num(found.map_or(-1.0, |i| i as f64))
                    }
                    _ => return Err(rt("Second argument to indexOf is not a string or array")),
                }
            }
            "join" => {
                let (sep, a) = (arg(0), arg(1));
                let V::Array(items) = a else {
                    return Err(rt("Second argument to join is not an array"));
                };
                let sep = match sep {
                    V::Undefined => ",".to_string(),
                    s => string_of(&s),
                };
                let parts: Vec<String> = items
                    .iter()
                    .map(|x| match x {
                        V::Undefined | V::Null => String::new(),
                        x => string_of(x),
                    })
                    .collect();
                let joined = parts.join(&sep);
                self.string(joined)?
            }
            op => self.unary(op, &arg(0))?,
        })
    }
}

/// JavaScript's `x | 0`.
fn to_int32(x: f64) -> i64 {
    if !x.is_finite() {
        return 0;
    }
    let m = x.trunc().rem_euclid(4_294_967_296.0);
    let m = if m >= 2_147_483_648.0 {
        m - 4_294_967_296.0
    } else {
        m
    };
    m as i64
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

    fn ev(src: &str) -> Result<Value, HostError> {
        evaluate(&[Value::String(src.into())])
    }

    fn n(src: &str) -> f64 {
        match ev(src) {
            Ok(Value::Number(x)) => x,
            other => panic!("{src}: {other:?}"),
        }
    }

    #[test]
    fn the_language() {
        assert_eq!(n("1 + 2 * 3"), 7.0);
        assert_eq!(n("-2^2"), -4.0);
        assert_eq!(n("2^3^2"), 512.0);
        assert_eq!(n("5!"), 120.0);
        assert_eq!(n("sin 0 + cos(0)"), 1.0);
        assert_eq!(n("x = 3; x * 2"), 6.0);
        assert_eq!(n("f(x) = x * 2; f(21)"), 42.0);
        assert_eq!(n("fold(f(a, b) = a + b, 0, [1, 2, 3])"), 6.0);
        assert_eq!(n("length \"héllo\""), 5.0);
        assert_eq!(n("0x1f + 0b11"), 34.0);
        assert_eq!(n("roundTo(1.005, 2)"), 1.01);
        assert_eq!(ev("\"a\" || 1").must("a value"), Value::String("a1".into()));
        assert_eq!(ev("2 in [1, 2]").must("a value"), Value::Bool(true));
        assert_eq!(
            ev("1 < 2 and not false ? 'y' : 'n'").must("a value"),
            Value::String("y".into())
        );
        assert!(
            ev("x + 1")
                .err()
                .must("an error")
                .message()
                .contains("undefined variable: x")
        );
    }

    #[test]
    fn caps_hold() {
        let deep = format!("{}1{}", "(".repeat(40_000), ")".repeat(40_000));
        assert!(
            ev(&deep)
                .err()
                .must("an error")
                .message()
                .contains("nests deeper")
        );
        assert!(
            ev("f(x) = f(x + 1); f(0)")
                .err()
                .must("an error")
                .message()
                .contains("deeper than")
        );
        assert!(ev("map(f(x) = x, [1,2,3]) || ''").is_ok());
        let e = ev(&format!("s = 'ab'; {} length(s)", "s = s || s;".repeat(40)))
            .err()
            .must("an error");
        assert!(e.message().contains("bytes"), "{e}");
        assert!(n("9^9^9^9").is_infinite());
    }
}
