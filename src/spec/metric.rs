//! A check's metric expressions as a spec writes them, parsed where the spec is: where the
//! number is in the check's output (`json:/POINTER`, `regex:` with one capture group) and the
//! threshold it is decided against (`<= 1.05 * current`, `<= 250`). `validate::metrics` reads
//! and decides them on the site.

/// A metric expression that cannot be used, or a value that cannot be read from an output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricError {
    /// `from` is not `json:/POINTER` or `regex:` with one capture group.
    #[error("`{from}`: {why}")]
    Source { from: String, why: String },
    #[error("threshold `{text}`: {why} (e.g. `<= 1.05 * current`, `>= 0.95 * current`, `<= 250`)")]
    Threshold { text: String, why: String },
    #[error("the output is not JSON ({0})")]
    NotJson(String),
    #[error("the output has no `{0}`")]
    NoPointer(String),
    #[error("`{pointer}` is {value}, not a number")]
    NotANumberAt { pointer: String, value: String },
    #[error("`{0}` does not match the output")]
    NoMatch(String),
    #[error("`{0}` is not a number")]
    NotANumber(String),
}

impl crate::failure::Classify for MetricError {
    /// An expression the spec wrote; a value a check's output lacks is decided as missing
    /// evidence (red), never returned as an error.
    fn class(&self) -> crate::failure::Class {
        crate::failure::Class::Usage
    }
}

/// Where a metric's value is in the output.
pub enum Source {
    Json(String),
    Regex(regex::Regex),
}

impl Source {
    pub fn parse(from: &str) -> Result<Self, MetricError> {
        let bad = |why: String| MetricError::Source { from: from.to_owned(), why };
        if let Some(pointer) = from.strip_prefix("json:") {
            if !pointer.is_empty() && !pointer.starts_with('/') {
                return Err(bad("a JSON pointer starts with `/`".into()));
            }
            return Ok(Source::Json(pointer.to_owned()));
        }
        if let Some(pattern) = from.strip_prefix("regex:") {
            let re = regex::Regex::new(pattern).map_err(|e| bad(e.to_string()))?;
            if re.captures_len() != 2 {
                return Err(bad("the pattern needs exactly one capture group".into()));
            }
            return Ok(Source::Regex(re));
        }
        Err(bad("expected `json:/POINTER` or `regex:PATTERN`".into()))
    }

    /// The number in `output`, or why there is none.
    pub fn read(&self, output: &str) -> Result<f64, MetricError> {
        let text = match self {
            Source::Json(pointer) => {
                let doc: serde_json::Value =
                    serde_json::from_str(output.trim()).map_err(|e| MetricError::NotJson(e.to_string()))?;
                let value = doc.pointer(pointer).ok_or_else(|| MetricError::NoPointer(pointer.clone()))?;
                match value {
                    serde_json::Value::Number(n) => {
                        return n.as_f64().ok_or_else(|| MetricError::NotANumber(n.to_string()));
                    }
                    serde_json::Value::String(s) => s.clone(),
                    other => {
                        return Err(MetricError::NotANumberAt { pointer: pointer.clone(), value: other.to_string() });
                    }
                }
            }
            Source::Regex(re) => {
                let caps = re.captures(output).ok_or_else(|| MetricError::NoMatch(re.as_str().to_owned()))?;
                caps.get(1).map(|m| m.as_str().to_owned()).unwrap_or_default()
            }
        };
        text.trim().parse::<f64>().ok().filter(|v| v.is_finite()).ok_or(MetricError::NotANumber(text))
    }
}

/// `OP [FACTOR *] current [± OFFSET]` or `OP NUMBER`.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    op: Op,
    /// `Some((factor, offset))`: relative to the current stack's value.
    relative: Option<(f64, f64)>,
    absolute: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Le,
    Lt,
    Ge,
    Gt,
}

impl Threshold {
    pub fn parse(text: &str) -> Result<Self, MetricError> {
        let bad = |why: &str| MetricError::Threshold { text: text.to_owned(), why: why.to_owned() };
        let t = text.trim();
        let (op, rest) = [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)]
            .iter()
            .find_map(|(s, op)| t.strip_prefix(s).map(|r| (*op, r.trim())))
            .ok_or_else(|| bad("it starts with <=, <, >= or >"))?;
        let number = |s: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(&format!("`{}` is not a number", s.trim())))
        };
        if !rest.contains("current") {
            return Ok(Self { op, relative: None, absolute: number(rest)? });
        }
        let (factor, after) = match rest.split_once("current") {
            Some((before, after)) if before.trim().is_empty() => (1.0, after),
            Some((before, after)) => {
                let f = before.trim().strip_suffix('*').ok_or_else(|| bad("a factor is written `F * current`"))?;
                (number(f)?, after)
            }
            None => unreachable!("contains `current`"),
        };
        let after = after.trim();
        let offset = if after.is_empty() {
            0.0
        } else if let Some(n) = after.strip_prefix('+') {
            number(n)?
        } else if let Some(n) = after.strip_prefix('-') {
            -number(n)?
        } else {
            return Err(bad(&format!("unexpected `{after}`")));
        };
        Ok(Self { op, relative: Some((factor, offset)), absolute: 0.0 })
    }

    /// The bound for a current value (`None`: relative, and there is none).
    pub(crate) fn bound(&self, current: Option<f64>) -> Option<f64> {
        match self.relative {
            None => Some(self.absolute),
            Some((factor, offset)) => current.map(|c| factor * c + offset),
        }
    }

    pub(crate) fn holds(&self, value: f64, bound: f64) -> bool {
        match self.op {
            Op::Le => value <= bound,
            Op::Lt => value < bound,
            Op::Ge => value >= bound,
            Op::Gt => value > bound,
        }
    }
}
