//! The fix offered when a kernel lacks SATA or md: the `[kernel]` recipe
//! lines that would build one, from the board's kernel defaults.

use crate::board::Model;
use crate::kernel::Capability;

/// The `[kernel]` lines that would fix a kernel lacking SATA or md on
/// `board`, for the error that reports it.
pub fn remedy(board: Model, require: &[Capability]) -> String {
    let b = board.info().kernel;
    let Some(defconfig) = &b.defconfig else {
        return format!(
            "nasforge cannot build a kernel for {board}: {}",
            b.unverified
                .as_deref()
                .unwrap_or("no defconfig is known for it")
        );
    };
    let frags: Vec<String> = b.fragments.iter().map(|f| format!("\"{f}\"")).collect();
    let req: Vec<String> = require.iter().map(|c| format!("\"{c}\"")).collect();
    let source = b.source.as_deref().unwrap_or("path/to/linux");
    format!(
        "To build a kernel that has them, add to the recipe:\n\n[kernel]\nrequire = [{}]\nbuild = {{ source = \"{source}\", sha256 = \"<sha256 of that file>\", defconfig = \"{defconfig}\", fragments = [{}] }}\n\nwhere the source is {}; or `source = \"path/to/linux\"` for a kernel tree on this machine (no sha256). Then `nasforge kernel build RECIPE` builds it (cached) and `nasforge build RECIPE` installs it beside the stock kernel.",
        req.join(", "),
        frags.join(", "),
        b.tree
            .as_deref()
            .unwrap_or("the kernel tree for this board"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remedy_gives_the_recipe_lines_for_the_board() {
        let r = remedy(Model::Pi5, &[Capability::Sata, Capability::Md]);
        assert!(r.contains("[kernel]\nrequire = [\"sata\", \"md\"]\nbuild = { source = \"https://github.com/raspberrypi/linux/archive/<commit>.tar.gz\", sha256 = \"<sha256 of that file>\", defconfig = \"bcm2712_defconfig\", fragments = [\"sata\", \"md-raid\", \"nas\"] }"), "{r}");
        let r = remedy(Model::Rock5b, &[Capability::Sata]);
        assert!(r.contains("defconfig = \"defconfig\", fragments = [\"sata\", \"md-raid\", \"nas\", \"rockchip-sata\"]"), "{r}");
        assert!(
            remedy(Model::GenericArm64, &[])
                .starts_with("nasforge cannot build a kernel for generic-arm64")
        );
    }
}
