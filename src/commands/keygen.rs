//! `airlock keygen --out-dir DIR [--name NAME] [--json]`

use std::io::Write;

use crate::cli::KeygenArgs;
use crate::failure::{Exit, Result};
use crate::sign::{PASSWORD_ENV, generate};

pub fn run(args: &KeygenArgs) -> Result<Exit> {
    if args.name.is_empty() || args.name.contains('/') || args.name.starts_with('.') {
        return Err(super::UsageError(format!("invalid key name `{}`: expected a plain file name", args.name)).into());
    }
    // Refusing to overwrite comes first: no warning about a key that will not be written.
    crate::sign::refuse_existing(&args.out_dir, &args.name)?;
    let password = super::key_password().filter(|p| !p.is_empty());
    if password.is_none() {
        tracing::warn!(
            "{PASSWORD_ENV} is not set: the private key is written UNENCRYPTED (PKCS#8); protect it by file permissions"
        );
    }
    let key = generate(&args.out_dir, &args.name, password.as_deref())?;
    if args.json {
        super::print_json(&serde_json::json!({
            "key_id": key.key_id,
            "private_key": key.private_path,
            "public_key": key.public_path,
            "encrypted": key.encrypted,
        }))?;
    } else {
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "private key: {} ({})",
            key.private_path.display(),
            if key.encrypted { "encrypted" } else { "UNENCRYPTED" }
        )?;
        writeln!(out, "public key:  {}", key.public_path.display())?;
        writeln!(out, "key id:      {}", key.key_id)?;
    }
    Ok(Exit::Ok)
}
