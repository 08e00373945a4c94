use std::io::{ErrorKind, Write};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Parser;

use bootimage_webhook::config::{Cli, Command, PreviewArgs, SkewCommand, SkewRecordArgs};
use bootimage_webhook::serve::tls;
use bootimage_webhook::{app, logging, preview, status};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Exit status 2 is `preview --exit-code`'s "would change"; usage errors are 1.
            return if e.use_stderr() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // Only ring is compiled in; installing it makes that explicit for every rustls user.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Some(path) = cli.egress.trusted_ca_bundle.clone() {
        bootimage_webhook::cluster::egress::trust_ca_bundle(path);
    }
    match cli.command {
        Command::Serve(args) => {
            logging::init(&cli.log)?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?
                .block_on(app::serve(*args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Import(args) => {
            logging::init(&cli.log)?;
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?
                .block_on(bootimage_webhook::import::import(*args))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Preview(args) => preview(&args),
        Command::Certs(args) => {
            if !args.force {
                for name in tls::DevCerts::FILES {
                    let path = args.out.join(name);
                    if path.exists() {
                        bail!(
                            "{} exists; not overwriting it (give --force to make a new CA and pair)",
                            path.display()
                        );
                    }
                }
            }
            let certs = tls::DevCerts::generate(&args.dns)?;
            certs.write(&args.out)?;
            eprintln!(
                "wrote {0}/ca.crt, {0}/tls.crt, {0}/tls.key; caBundle:",
                args.out.display()
            );
            println!("{}", certs.ca_bundle());
            Ok(ExitCode::SUCCESS)
        }
        Command::Status(args) => {
            let report = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?
                .block_on(status::report(&args))?;
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(status::render(&report, args.output).as_bytes())
                .and_then(|()| stdout.flush())
            {
                Err(e) if e.kind() == ErrorKind::BrokenPipe => {}
                other => other.context("writing the status")?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Skew(skew) => match skew.command {
            SkewCommand::Record(args) => skew_record(&args),
            SkewCommand::Keep(args) => {
                logging::init(&cli.log)?;
                tokio::runtime::Builder::new_multi_thread()
                    .enable_all()
                    .build()
                    .context("starting the runtime")?
                    .block_on(bootimage_webhook::keep::keep(args))?;
                Ok(ExitCode::SUCCESS)
            }
        },
    }
}

/// `skew record`: the change, and with --apply what was written. A refusal is an error
/// (exit status 1), after which nothing was written.
fn skew_record(args: &SkewRecordArgs) -> anyhow::Result<ExitCode> {
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(status::record(args))?;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(status::render_outcome(&outcome, args.status.output).as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {}
        other => other.context("writing the record")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// One JSON line per MachineSet. A reader that closes the pipe early (`| head`) ends the
/// output quietly: what it did not read it did not want.
fn preview(args: &PreviewArgs) -> anyhow::Result<ExitCode> {
    let out = preview::run(&args.machineset_file, &args.offline.offline(&args.grant))?;
    for skipped in &out.skipped {
        eprintln!("preview: skipping {skipped}: not a MachineSet");
    }
    let mut stdout = std::io::stdout().lock();
    let written = out.results.iter().try_for_each(|r| {
        serde_json::to_writer(&mut stdout, r)?;
        stdout.write_all(b"\n")?;
        Ok::<_, std::io::Error>(())
    });
    match written.and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == ErrorKind::BrokenPipe => {}
        other => other.context("writing the results")?,
    }
    Ok(if args.exit_code && out.changes {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
