//! Architectures: the Kubernetes/Go names MachineSets use and the RPM names the stream uses.

use std::fmt;

/// Architectures, with the Kubernetes/Go name used in MachineSets and the RPM name used
/// in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    Amd64,
    Arm64,
    Ppc64le,
    S390x,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::Amd64, Arch::Arm64, Arch::Ppc64le, Arch::S390x];

    pub fn k8s(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
            Arch::Ppc64le => "ppc64le",
            Arch::S390x => "s390x",
        }
    }

    pub fn rpm(self) -> &'static str {
        match self {
            Arch::Amd64 => "x86_64",
            Arch::Arm64 => "aarch64",
            Arch::Ppc64le => "ppc64le",
            Arch::S390x => "s390x",
        }
    }

    pub fn from_k8s(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.k8s() == name)
    }

    pub fn from_rpm(name: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.rpm() == name)
    }

    /// Either spelling, for flags typed by people.
    pub fn parse(name: &str) -> Option<Arch> {
        Arch::from_k8s(name).or_else(|| Arch::from_rpm(name))
    }

    /// The architecture this binary was built for (the control plane's, when we run on it).
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::Amd64),
            "aarch64" => Some(Arch::Arm64),
            "powerpc64" => Some(Arch::Ppc64le),
            "s390x" => Some(Arch::S390x),
            _ => None,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.rpm())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_round_trip() {
        for a in Arch::ALL {
            assert_eq!(Arch::from_k8s(a.k8s()), Some(a));
            assert_eq!(Arch::from_rpm(a.rpm()), Some(a));
        }
        assert_eq!(Arch::parse("x86_64"), Some(Arch::Amd64));
        assert_eq!(Arch::parse("arm64"), Some(Arch::Arm64));
        assert_eq!(Arch::parse("riscv64"), None);
    }
}
