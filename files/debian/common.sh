# Shared by the layout hooks (src/debian.rs puts it before each).

# Fails the base build unless every kernel in the tree can reach its root
# with the drivers named. A driver is there when the initramfs carries it or
# the kernel has it built in (modules.builtin): trixie's 6.12 builds
# virtio_pci in, where bookworm's 6.1 made it a module.
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

# Copies the finished tree in "$1" to a new directory, printed, as the
# image's root filesystem holds it: without the /proc, /sys and /dev
# mmdebstrap has mounted into it (cp -x stays on one filesystem), and
# without what the build itself needed.
stage_tree() {
	_stage=$(mktemp -d)
	cp -ax "$1/." "$_stage/"
	# While it installs, mmdebstrap stops maintainer scripts from starting
	# services (policy-rc.d, a start-stop-daemon stand-in) and undoes that
	# only after the hooks; this copy is taken inside a hook, so it undoes
	# it here.
	rm -f "$_stage/usr/sbin/policy-rc.d"
	# nasforge's own unsafe-io for dpkg while the base installed (src/debian.rs).
	rm "$_stage/etc/dpkg/dpkg.cfg.d/nasforge-build"
	if [ -e "$_stage/usr/sbin/start-stop-daemon.REAL" ]; then
		mv "$_stage/usr/sbin/start-stop-daemon.REAL" "$_stage/usr/sbin/start-stop-daemon"
	fi
	# Every board made from this image gets a machine id of its own at its
	# first boot (systemd's ConditionFirstBoot, as pi-gen leaves Raspberry Pi
	# OS): the id the package installs made would be shared by all of them,
	# and with it systemd-networkd's DHCP client identity.
	echo uninitialized >"$_stage/etc/machine-id"
	rm -f "$_stage/var/lib/dbus/machine-id"
	echo "$_stage"
}
