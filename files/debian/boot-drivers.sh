# Shared by the layout hooks (src/debian.rs puts it before each): fails the
# base build unless every kernel in the tree can reach its root with the
# drivers named. A driver is there when the initramfs carries it or the
# kernel has it built in (modules.builtin): trixie's 6.12 builds virtio_pci
# in, where bookworm's 6.1 made it a module.
require_boot_drivers() {
	_root="$1"
	shift
	_listing=$(mktemp)
	chroot "$_root" sh -c 'for i in /boot/initrd.img-*; do lsinitramfs "$i"; done' >"$_listing"
	cat "$_root"/lib/modules/*/modules.builtin >>"$_listing"
	for _ko in "$@"; do
		if ! grep -q "/$_ko\.ko" "$_listing"; then
			echo "nasforge: the base image's kernel has no $_ko driver, neither in its initramfs nor built in; the kernel's modules changed" >&2
			rm "$_listing"
			exit 1
		fi
	done
	rm "$_listing"
}
