//! Secret volumes laid out the way the kubelet lays them out (timestamped directory,
//! `..data` symlink swapped on update), for certificate rotation tests.

use std::path::{Path, PathBuf};

use bootimage_webhook::serve::tls::DevCerts;

/// A Secret volume as the kubelet writes it: `..<ts>/` holds the files, `..data` points
/// at it, and `tls.crt`/`tls.key` point through `..data`. Updates swap `..data`.
pub struct SecretVolume {
    pub dir: PathBuf,
    generation: u32,
}

impl SecretVolume {
    pub fn new(dir: &Path, certs: &DevCerts) -> Self {
        let mut v = SecretVolume {
            dir: dir.to_owned(),
            generation: 0,
        };
        v.update(certs.chain_pem.as_bytes(), certs.key_pem.as_bytes());
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{name}"), dir.join(name)).unwrap();
        }
        v
    }

    /// Write a new timestamped directory and atomically repoint `..data` at it.
    pub fn update(&mut self, cert: &[u8], key: &[u8]) {
        self.generation += 1;
        let ts = format!(
            "..2026_12_02_00_00_{:02}.{}",
            self.generation,
            std::process::id()
        );
        let data = self.dir.join(&ts);
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(data.join("tls.crt"), cert).unwrap();
        std::fs::write(data.join("tls.key"), key).unwrap();
        let tmp = self.dir.join("..data_tmp");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&ts, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.join("..data")).unwrap();
    }

    #[allow(dead_code, reason = "only the fast tier uses it")]
    pub fn cert(&self) -> PathBuf {
        self.dir.join("tls.crt")
    }

    #[allow(dead_code, reason = "only the fast tier uses it")]
    pub fn key(&self) -> PathBuf {
        self.dir.join("tls.key")
    }
}
