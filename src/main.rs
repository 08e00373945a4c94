use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use bootimage_webhook::config::{Cli, Command};
use bootimage_webhook::{app, logging, preview, tls};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // Only ring is compiled in; installing it makes that explicit for every rustls user.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match cli.command {
        Command::Serve(args) => {
            logging::init(&cli.log)?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?
                .block_on(app::serve(*args))
        }
        Command::Preview(args) => {
            let out = preview::run(&args.machineset_file, &args.offline.offline())?;
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(())
        }
        Command::Certs(args) => {
            let certs = tls::DevCerts::generate(&args.dns)?;
            certs.write(&args.out)?;
            eprintln!(
                "wrote {0}/ca.crt, {0}/tls.crt, {0}/tls.key; caBundle:",
                args.out.display()
            );
            println!("{}", certs.ca_bundle());
            Ok(())
        }
    }
}
