//! A check's metric expressions as a spec writes them, parsed where the spec is: where the
//! number is in the check's output (`json:/POINTER`, `regex:` with one capture group) and the
//! threshold it is decided against (`<= 1.05 * current`, `<= 250`). `validate::metrics` reads
//! and decides them on the site.

/// Where a metric's value is in the output.
pub enum Source {
    Json(String),
    Regex(regex::Regex),
}

impl Source {
    pub fn parse(from: &str) -> Result<Self, String> {
        if let Some(pointer) = from.strip_prefix("json:") {
            if !pointer.is_empty() && !pointer.starts_with('/') {
                return Err(format!("`{from}`: a JSON pointer starts with `/`"));
            }
            return Ok(Source::Json(pointer.to_owned()));
        }
        if let Some(pattern) = from.strip_prefix("regex:") {
            let re = regex::Regex::new(pattern).map_err(|e| format!("`{from}`: {e}"))?;
            if re.captures_len() != 2 {
                return Err(format!("`{from}`: the pattern needs exactly one capture group"));
            }
            return Ok(Source::Regex(re));
        }
        Err(format!("`{from}`: expected `json:/POINTER` or `regex:PATTERN`"))
    }

    /// The number in `output`, or why there is none.
    pub fn read(&self, output: &str) -> Result<f64, String> {
        let text = match self {
            Source::Json(pointer) => {
                let doc: serde_json::Value =
                    serde_json::from_str(output.trim()).map_err(|e| format!("the output is not JSON ({e})"))?;
                let value = doc.pointer(pointer).ok_or_else(|| format!("the output has no `{pointer}`"))?;
                match value {
                    serde_json::Value::Number(n) => return n.as_f64().ok_or_else(|| "not a finite number".to_owned()),
                    serde_json::Value::String(s) => s.clone(),
                    other => return Err(format!("`{pointer}` is {other}, not a number")),
                }
            }
            Source::Regex(re) => {
                let caps = re.captures(output).ok_or_else(|| format!("`{}` does not match the output", re.as_str()))?;
                caps.get(1).map(|m| m.as_str().to_owned()).unwrap_or_default()
            }
        };
        text.trim().parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| format!("`{text}` is not a number"))
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
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad =
            |why: &str| format!("threshold `{text}`: {why} (e.g. `<= 1.05 * current`, `>= 0.95 * current`, `<= 250`)");
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
