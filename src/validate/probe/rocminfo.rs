//! `rocminfo`: agents between `*******` rulers, `Label:` padded to 25 columns and values to 35
//! (so lines carry trailing spaces); CPU agents too. The first line names the `ROCk` module's
//! version, or reads `ROCk module is loaded` without one (an inbox driver).

/// One GPU agent.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Agent {
    pub gfx: String,
    pub market_name: String,
    pub compute_units: String,
    pub chip_id: String,
}

/// The GPU agents, in order, and the `ROCk` module version when it is printed.
pub fn parse(stdout: &str) -> (Vec<Agent>, Option<String>) {
    let module = stdout
        .lines()
        .next()
        .and_then(|l| l.trim().strip_prefix("ROCk module version "))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_owned);
    let mut agents = Vec::new();
    for block in stdout.split("*******").filter(|b| b.contains("Device Type:")) {
        // Top-level fields only: the ISA block below repeats `Name:` two levels deeper.
        let field = |label: &str| {
            block.lines().find_map(|l| {
                let indent = l.len() - l.trim_start().len();
                (indent == 2).then(|| l.trim().strip_prefix(label).map(|v| v.trim().to_owned())).flatten()
            })
        };
        if field("Device Type:").as_deref() != Some("GPU") {
            continue;
        }
        let known = |v: Option<String>| super::unknown_if_absent(v);
        agents.push(Agent {
            gfx: known(field("Name:")),
            market_name: known(field("Marketing Name:")),
            compute_units: known(field("Compute Unit:")),
            chip_id: known(
                field("Chip ID:").and_then(|c| c.split('(').nth(1).map(|h| h.trim_end_matches(')').to_owned())),
            ),
        });
    }
    (agents, module)
}

/// Legacy `rocm-smi --showproductname --json` (one line, all strings): `(series, gfx)` per card,
/// the fallback for a current-state record where amd-smi is missing. Its `gfx9010` for a
/// gfx90a is reported as it is: it is evidence, not a guess.
pub fn parse_legacy(stdout: &str) -> Result<Vec<(String, String)>, super::amdsmi::AnswerError> {
    use super::amdsmi::AnswerError;
    let value: serde_json::Value = serde_json::from_str(stdout.trim())
        .map_err(|e| AnswerError::NotJson { detail: e.to_string(), first_line: None })?;
    let cards = value.as_object().ok_or(AnswerError::Shape("not an object of cards"))?;
    Ok(cards
        .values()
        .map(|c| {
            let s = |k: &str| super::unknown_if_absent(c.get(k).and_then(|v| v.as_str()).map(str::to_owned));
            (s("Card Series"), s("GFX Version"))
        })
        .collect())
}
