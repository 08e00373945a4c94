//! Logs: plain text lines for `oc logs` by default (no colours: pods have no TTY), JSON on
//! request, filtered with RUST_LOG syntax.

use tracing_subscriber::EnvFilter;

use crate::config::{LogArgs, LogFormat};

#[derive(Debug, thiserror::Error)]
#[error("invalid log filter {filter:?}: {source}")]
pub struct LogError {
    filter: String,
    source: tracing_subscriber::filter::ParseError,
}

pub fn init(args: &LogArgs) -> Result<(), LogError> {
    let filter = EnvFilter::try_new(&args.log_level).map_err(|source| LogError {
        filter: args.log_level.clone(),
        source,
    })?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stdout)
        .with_ansi(false);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(())
}
