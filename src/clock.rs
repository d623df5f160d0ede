//! Build timestamps: `SOURCE_DATE_EPOCH` (reproducible-builds.org) when set, otherwise a time
//! recorded in the lock, never the wall clock at pack time, so rebuilds are byte-identical.

use std::fmt;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Seconds since the Unix epoch, UTC, always printed as RFC 3339 (`2026-11-29T16:10:51Z`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timestamp(u64);

#[derive(Debug, thiserror::Error)]
pub enum ClockError {
    #[error("SOURCE_DATE_EPOCH must be a non-negative integer number of seconds, got `{0}`")]
    BadSourceDateEpoch(String),
    #[error("`{value}` is not an RFC 3339 UTC timestamp such as `2026-11-29T16:10:51Z`")]
    BadTimestamp { value: String },
}

impl crate::failure::Classify for ClockError {
    fn class(&self) -> crate::failure::Class {
        match self {
            ClockError::BadSourceDateEpoch(_) | ClockError::BadTimestamp { .. } => crate::failure::Class::Runtime,
        }
    }
}

impl Timestamp {
    pub fn from_unix(secs: u64) -> Self {
        Self(secs)
    }

    pub fn unix(self) -> u64 {
        self.0
    }

    /// The time this process started (taken at the first call, which `main` makes first):
    /// what expiry is checked against, so one command judges every date by one clock.
    pub fn started() -> Self {
        static STARTED: std::sync::OnceLock<Timestamp> = std::sync::OnceLock::new();
        *STARTED.get_or_init(Self::now)
    }

    pub fn now() -> Self {
        let secs = OffsetDateTime::now_utc().unix_timestamp();
        Self(u64::try_from(secs).unwrap_or(0).saturating_add(test_clock_ahead()))
    }

    /// `SOURCE_DATE_EPOCH` from the environment, if set and not empty.
    pub fn source_date_epoch() -> Result<Option<Self>, ClockError> {
        match std::env::var("SOURCE_DATE_EPOCH") {
            Ok(v) if !v.trim().is_empty() => {
                v.trim().parse::<u64>().map(|s| Some(Self(s))).map_err(|_| ClockError::BadSourceDateEpoch(v))
            }
            _ => Ok(None),
        }
    }

    /// A date (`2027-06-30`: valid through that day, so the instant the next day starts, UTC)
    /// or an RFC 3339 timestamp: how a spec and `--expires` name an expiry.
    pub fn parse_expiry(value: &str) -> Result<Self, ClockError> {
        let format = time::macros::format_description!("[year]-[month]-[day]");
        match time::Date::parse(value.trim(), &format) {
            Ok(date) => {
                let next = date.next_day().ok_or_else(|| ClockError::BadTimestamp { value: value.to_owned() })?;
                let t = next.midnight().assume_utc().unix_timestamp();
                u64::try_from(t).map(Self).map_err(|_| ClockError::BadTimestamp { value: value.to_owned() })
            }
            Err(_) => Self::parse_rfc3339(value.trim()),
        }
    }

    /// `--expires`: a duration from `now` (`90d`, `1y`, `12h`, `30m`, `45s`; a year is 365
    /// days) or what `parse_expiry` reads.
    pub fn parse_expires_after(value: &str, now: Self) -> Result<Self, ClockError> {
        let v = value.trim();
        let unit = v.chars().last().and_then(|c| match c {
            's' => Some(1u64),
            'm' => Some(60),
            'h' => Some(3600),
            'd' => Some(86_400),
            'w' => Some(7 * 86_400),
            'y' => Some(365 * 86_400),
            _ => None,
        });
        if let Some(unit) = unit
            && let Ok(n) = v[..v.len() - 1].parse::<u64>()
        {
            return n
                .checked_mul(unit)
                .and_then(|s| now.0.checked_add(s))
                .map(Self)
                .ok_or_else(|| ClockError::BadTimestamp { value: value.to_owned() });
        }
        Self::parse_expiry(v)
    }

    pub fn parse_rfc3339(value: &str) -> Result<Self, ClockError> {
        let bad = || ClockError::BadTimestamp { value: value.to_owned() };
        let t = OffsetDateTime::parse(value, &Rfc3339).map_err(|_| bad())?;
        u64::try_from(t.unix_timestamp()).map(Self).map_err(|_| bad())
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every u64 second count up to year 9999 formats; beyond that fall back to the number.
        let formatted = i64::try_from(self.0)
            .ok()
            .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
            .and_then(|t| t.format(&Rfc3339).ok());
        match formatted {
            Some(s) => f.write_str(&s),
            None => write!(f, "@{}", self.0),
        }
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Self::parse_rfc3339(&s).map_err(serde::de::Error::custom)
    }
}

/// Seconds a test moves this process's clock ahead (`AIRLOCK_TEST_CLOCK_AHEAD`), so that an
/// expiry can be crossed without waiting for it. Debug builds only, as the crash points: a
/// release build reads the real clock and nothing else.
#[cfg(debug_assertions)]
fn test_clock_ahead() -> u64 {
    std::env::var("AIRLOCK_TEST_CLOCK_AHEAD").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

#[cfg(not(debug_assertions))]
#[inline]
fn test_clock_ahead() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_rfc3339_utc() {
        let t = Timestamp::from_unix(1_764_432_000);
        assert_eq!(t.to_string(), "2025-11-29T16:00:00Z");
        assert_eq!(Timestamp::parse_rfc3339("2025-11-29T16:00:00Z").unwrap(), t);
        assert!(Timestamp::parse_rfc3339("yesterday").is_err());
    }
}
