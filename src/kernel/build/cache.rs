//! The build cache: `<cache>/kernels/builds/<key>`, where the key is the
//! source digest, the defconfig and the fragments' settings.

use super::digest::sha256_file;
use super::kernels_dir;
use super::source::source_digest;
use super::spec::{BuildSpec, Defconfig, KernelSource};
use super::{ARCH, FORMAT, LOCALVERSION};
use anyhow::Result;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The cache key of a build: source digest, defconfig (its content for a
/// file) and every fragment's settings, in order. Comments in fragments
/// do not change it.
pub fn cache_key(source_digest: &str, spec: &BuildSpec) -> Result<String> {
    let mut h = Sha256::new();
    h.update(format!(
        "{FORMAT}\nsource {source_digest}\narch {ARCH}\nlocalversion {LOCALVERSION}\n"
    ));
    match &spec.defconfig {
        Defconfig::Target(t) => h.update(format!("defconfig {t}\n")),
        Defconfig::File(p) => h.update(format!("defconfig-file {}\n", sha256_file(p)?)),
    }
    for f in &spec.fragments {
        let frag = f.load()?;
        h.update(format!(
            "fragment {}\n",
            frag.name.rsplit('/').next().unwrap_or(&frag.name)
        ));
        for s in &frag.settings {
            h.update(s.render());
            h.update("\n");
        }
    }
    Ok(hex::encode(h.finalize()))
}

fn result_dir(cache: &Path, key: &str) -> PathBuf {
    kernels_dir(cache).join("builds").join(key)
}

/// The directory a build of `spec` is cached in, whether or not it exists
/// yet. A download is not needed for this (its sha256 is its digest); a
/// local tarball or tree is hashed.
pub fn cached_dir(spec: &BuildSpec, cache: &Path) -> Result<PathBuf> {
    Ok(locate(spec, cache)?.1)
}

pub(super) fn locate(spec: &BuildSpec, cache: &Path) -> Result<(String, PathBuf)> {
    let digest = match &spec.source {
        KernelSource::Url { sha256, .. } => sha256.clone(),
        _ => source_digest(spec, cache)?.0,
    };
    let dir = result_dir(cache, &cache_key(&digest, spec)?);
    Ok((digest, dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::build::FragmentRef;
    use std::fs;

    #[test]
    fn cache_key_follows_settings_not_comments() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.config");
        let spec = |defconfig: &str| BuildSpec {
            source: KernelSource::Tree(dir.path().into()),
            defconfig: Defconfig::Target(defconfig.into()),
            fragments: vec![
                FragmentRef::Bundled("sata".into()),
                FragmentRef::File(f.clone()),
            ],
        };
        fs::write(&f, "# why\nCONFIG_A=y\n").unwrap();
        let k1 = cache_key("abc", &spec("defconfig")).unwrap();
        fs::write(&f, "# a different reason\nCONFIG_A=y\n").unwrap();
        assert_eq!(cache_key("abc", &spec("defconfig")).unwrap(), k1);
        fs::write(&f, "CONFIG_A=m\n").unwrap();
        assert_ne!(cache_key("abc", &spec("defconfig")).unwrap(), k1);
        fs::write(&f, "CONFIG_A=y\n").unwrap();
        assert_ne!(cache_key("abd", &spec("defconfig")).unwrap(), k1);
        assert_ne!(cache_key("abc", &spec("allnoconfig")).unwrap(), k1);
    }
}
