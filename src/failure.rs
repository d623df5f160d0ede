//! How the process ends ([`Exit`], every exit code `docs/architecture.md` names in "Errors and
//! exit codes", numbered here and nowhere else) and what kind of failure an error is
//! ([`Class`], the exit of a command that failed).
//!
//! Every error type a command can end with implements [`Classify`] with an exhaustive `match`
//! (no `_` arm), so a new variant does not compile until someone has said whether it is a
//! verification failure: a digest or size that does not match can never silently exit 1.
//! Wrapping variants ask the error they wrap.

/// How a failure ends the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Something went wrong that is nobody's verdict on the input: I/O, network, a server error.
    Runtime,
    /// The user asked for something that cannot be done as asked: flags, an invalid spec.
    Usage,
    /// Content, a signature or a policy did not verify.
    Verification,
    /// The GPU stack is not one the bundle's support matrix supports (red, or amber not accepted).
    ValidationRed,
}

/// Every way a command ends (`docs/architecture.md`, "Errors and exit codes"). A command returns one; an error ends
/// with its [`Class`]'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    Failed(Class),
    /// `apply`: applied, a reboot pending (`validate --commit` after it).
    PendingReboot,
    /// `outdated`: something moved or an amber acceptance expired; `probe --inventory-diff`:
    /// the two inventories differ.
    Differ,
}

impl Exit {
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Failed(Class::Runtime) => 1,
            Exit::Failed(Class::Usage) => 2,
            Exit::Failed(Class::Verification) => 3,
            Exit::Failed(Class::ValidationRed) => 4,
            Exit::PendingReboot => 5,
            Exit::Differ => 10,
        }
    }

    /// The name a `--json` error document gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Failed(Class::Runtime) => "runtime",
            Exit::Failed(Class::Usage) => "usage",
            Exit::Failed(Class::Verification) => "verification",
            Exit::Failed(Class::ValidationRed) => "validation",
            Exit::PendingReboot => "pending-reboot",
            Exit::Differ => "differ",
        }
    }
}

impl From<Class> for Exit {
    fn from(class: Class) -> Self {
        Exit::Failed(class)
    }
}

/// An error with its causes, `outer: cause: …` (a cause its outer message already ends with
/// is not repeated): for records and messages that keep the whole chain in one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// An error that knows its [`Class`].
pub trait Classify {
    fn class(&self) -> Class;
}
