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

/// What a command ends with: an error and the [`Class`] it was given where it became a failure.
///
/// Any error type that knows its class converts with `?` (the class is read then, from the
/// type's own [`Classify`]); context added with [`Context`] keeps it. An error that does not
/// know its class cannot become a `Failure` without someone naming one ([`Failure::new`]), so
/// no failure reaches the exit code unclassified and no list of types decides it.
///
/// Not an `Error` itself (as `anyhow::Error` is not): that is what lets every classified error
/// convert into it.
pub struct Failure {
    class: Class,
    error: anyhow::Error,
}

/// A command's result: a [`Failure`] unless another error type is named.
pub type Result<T, E = Failure> = std::result::Result<T, E>;

impl Failure {
    /// A failure that is only words, with the class the caller gives it.
    pub fn new(class: Class, message: impl std::fmt::Display + std::fmt::Debug + Send + Sync + 'static) -> Self {
        Self { class, error: anyhow::Error::msg(message) }
    }

    /// An error of a type that does not say its class (another crate's), with the class the
    /// caller gives it.
    pub fn classed(class: Class, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self { class, error: anyhow::Error::new(error) }
    }

    pub const fn class(&self) -> Class {
        self.class
    }

    /// How the process ends for this failure.
    pub const fn exit(&self) -> Exit {
        Exit::Failed(self.class)
    }

    /// The failure with `context` said before it; the class is unchanged.
    #[must_use]
    pub fn context(self, context: impl std::fmt::Display + Send + Sync + 'static) -> Self {
        Self { class: self.class, error: self.error.context(context) }
    }

    /// The error and its causes, outermost first.
    pub fn chain(&self) -> anyhow::Chain<'_> {
        self.error.chain()
    }
}

impl<E: Classify + std::error::Error + Send + Sync + 'static> From<E> for Failure {
    fn from(error: E) -> Self {
        Self { class: error.class(), error: anyhow::Error::new(error) }
    }
}

/// `outer: cause: …` with `{:#}`, the outermost message alone with `{}`.
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if f.alternate() { write!(f, "{:#}", self.error) } else { write!(f, "{}", self.error) }
    }
}

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} ({:?})", self.error, self.class)
    }
}

/// Context for a result on its way to a [`Failure`], keeping its class.
pub trait Context<T> {
    fn context(self, context: impl std::fmt::Display + Send + Sync + 'static) -> Result<T>;
    fn with_context<C: std::fmt::Display + Send + Sync + 'static>(self, context: impl FnOnce() -> C) -> Result<T>;
}

impl<T, E: Into<Failure>> Context<T> for Result<T, E> {
    fn context(self, context: impl std::fmt::Display + Send + Sync + 'static) -> Result<T> {
        self.map_err(|e| e.into().context(context))
    }

    fn with_context<C: std::fmt::Display + Send + Sync + 'static>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| e.into().context(context()))
    }
}

/// Reading or writing a file, a pipe or the terminal failed: nobody's verdict on the input.
/// (A library error that wraps an `io::Error` says its own class; this is for what a command
/// reads and prints itself.)
impl Classify for std::io::Error {
    fn class(&self) -> Class {
        Class::Runtime
    }
}

/// A document could not be written as JSON, or one a command reads itself is not JSON.
impl Classify for serde_json::Error {
    fn class(&self) -> Class {
        Class::Runtime
    }
}

#[cfg(test)]
mod tests {
    use super::{Class, Classify, Context as _, Exit, Failure};

    #[derive(Debug, thiserror::Error)]
    #[error("the digest differs")]
    struct Differs;

    impl Classify for Differs {
        fn class(&self) -> Class {
            Class::Verification
        }
    }

    fn verify() -> Result<(), Differs> {
        Err(Differs)
    }

    #[test]
    fn a_failure_keeps_the_class_of_the_error_it_was_made_of_through_its_context() {
        let run = || -> super::Result<()> {
            verify().with_context(|| "`b.airlock`")?;
            Ok(())
        };
        let failed = run().unwrap_err();
        assert_eq!(failed.exit(), Exit::Failed(Class::Verification));
        assert_eq!(format!("{failed:#}"), "`b.airlock`: the digest differs");
        assert_eq!(failed.to_string(), "`b.airlock`");
        let io: Failure = std::io::Error::other("disk").into();
        assert_eq!(io.class(), Class::Runtime);
        assert_eq!(Failure::new(Class::Usage, "a flag").exit().code(), 2);
    }
}
