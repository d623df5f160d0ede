//! What kind of failure an error is, for the exit code (`docs/architecture.md`: 1 runtime
//! error, 2 usage error, 3 verification failed, 4 validation verdict red).
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

impl Class {
    pub const fn exit_code(self) -> u8 {
        match self {
            Class::Runtime => 1,
            Class::Usage => 2,
            Class::Verification => 3,
            Class::ValidationRed => 4,
        }
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
