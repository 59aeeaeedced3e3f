# mmdebstrap customize hook (run by nasforge, src/debian.rs): configures the
# finished Debian tree in "$1" for a Raspberry Pi and lays it out as a disk
# image at $NASFORGE_IMAGE, as Debian's raspi images are: MBR, FAT32
# RASPIFIRM (mounted at /boot/firmware), ext4 RASPIROOT.
set -eux
root="$1"
img="$NASFORGE_IMAGE"

cat >"$root/etc/fstab" <<FSTAB
LABEL=RASPIROOT / ext4 rw,errors=remount-ro 0 1
LABEL=RASPIFIRM /boot/firmware vfat rw,nofail 0 2
FSTAB

# Wired networking by DHCP on any Ethernet interface.
mkdir -p "$root/etc/systemd/network"
cat >"$root/etc/systemd/network/20-wired.network" <<NET
[Match]
Name=e*

[Network]
DHCP=yes
NET
chroot "$root" systemctl enable systemd-networkd.service

# The initramfs, once: nasforge diverted update-initramfs while packages
# installed (src/debian.rs).
rm -f "$root/usr/sbin/update-initramfs"
chroot "$root" dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs
# Debian's default, MODULES=most, copies every network, HID, SCSI HBA and
# framebuffer driver too, each module with several commands that qemu-user
# starts one by one: 18 of the 25 minutes a base took to build here. The
# image only has to find its root filesystem on the boards raspi-firmware
# boots and in a VM, so it takes the classes that does: what MODULES=most
# takes for the SoC itself (clocks, regulators, resets, PHYs, pin control,
# GPIO, buses, PCIe hosts, USB hosts) and for local storage (MMC, USB mass
# storage, NVMe, SATA, block), ext4, virtio, and a USB keyboard for the
# initramfs shell. Not NFS root or network boot. The hook uses
# initramfs-tools' own functions and is removed once the image is built.
cat >"$root/etc/initramfs-tools/conf.d/nasforge-modules.conf" <<CONF
# nasforge: the base image's first initramfs (hooks/nasforge-boot-media)
MODULES=list
CONF
cat >"$root/etc/initramfs-tools/hooks/nasforge-boot-media" <<'HOOK'
#!/bin/sh
case "$1" in prereqs) exit 0 ;; esac
. /usr/share/initramfs-tools/hook-functions
for dir in bus clk gpio mfd pci/controller phy pinctrl regulator reset \
	usb/phy usb/host usb/dwc2 usb/dwc3 usb/storage mmc nvme ata block; do
	copy_modules_dir "kernel/drivers/$dir"
done
manual_add_modules ext4 sd_mod virtio_pci virtio_mmio virtio_blk virtio_scsi \
	onboard_usb_hub usbhid hid-generic
HOOK
chmod 755 "$root/etc/initramfs-tools/hooks/nasforge-boot-media"
chroot "$root" update-initramfs -c -k all
rm "$root/etc/initramfs-tools/hooks/nasforge-boot-media"
# What the Pi's SD card, a USB or NVMe disk and a VM's disk need, checked
# in the result: a renamed module in a newer kernel fails here, not at boot.
require_boot_drivers "$root" ext4 sd_mod sdhci-iproc usb-storage uas xhci-pci nvme virtio_blk virtio_pci
# Later rebuilds happen on the board itself (a kernel update): there the
# running hardware is known, and taking only its drivers makes the rebuild
# several times faster.
cat >"$root/etc/initramfs-tools/conf.d/nasforge-modules.conf" <<CONF
# nasforge: rebuilt on the board, for the board it runs on
MODULES=dep
CONF

# raspi-firmware writes cmdline.txt from this; a label survives any disk name.
if grep -q '^#\?ROOTPART=' "$root/etc/default/raspi-firmware"; then
	sed -i 's|^#\?ROOTPART=.*|ROOTPART=LABEL=RASPIROOT|' "$root/etc/default/raspi-firmware"
else
	echo 'ROOTPART=LABEL=RASPIROOT' >>"$root/etc/default/raspi-firmware"
fi
chroot "$root" env DEB_MAINT_PARAMS=configure /etc/kernel/postinst.d/z50-raspi-firmware

stage=$(stage_tree "$root")
# The FAT partition's files live only there, not hidden under its mount.
fw=$(mktemp -d)
mv "$stage/boot/firmware/"* "$fw/"

used=$(du -s -B1M "$stage" | cut -f1)
root_mib=$((used + used / 4 + 512))
boot_mib=256
start=8192
root_start=$((start + boot_mib * 2048))
truncate -s $((4 + boot_mib + root_mib))M "$img"
printf 'label: dos\nunit: sectors\n\nstart=%s, size=%s, type=c, bootable\nstart=%s, type=83\n' \
	"$start" $((boot_mib * 2048)) "$root_start" | sfdisk -q "$img"
mkfs.vfat -F 32 -s 4 -n RASPIFIRM --offset "$start" "$img" $((boot_mib * 1024)) >/dev/null
MTOOLS_SKIP_CHECK=1 mcopy -s -i "$img@@$((start * 512))" "$fw"/* ::
mke2fs -q -t ext4 -L RASPIROOT -d "$stage" -E offset=$((root_start * 512)) "$img" "${root_mib}M"
rm -rf "$fw" "$stage"
