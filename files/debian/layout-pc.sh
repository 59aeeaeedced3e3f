# mmdebstrap customize hook (run by nasforge, src/debian.rs): configures the
# finished Debian amd64 tree in "$1" for a UEFI PC and lays it out as a disk
# image at $NASFORGE_IMAGE: GPT, a FAT32 EFI system partition (mounted at
# /boot/efi) holding GRUB at the path every UEFI firmware tries on a disk it
# has no boot entry for, and the ext4 root. Nothing is written to the
# firmware's NVRAM, so the disk boots in any PC and in a fresh OVMF.
set -eux
root="$1"
img="$NASFORGE_IMAGE"

# Every image built from this base shares these ids, as images of one
# release of a distribution do.
root_uuid=$(cat /proc/sys/kernel/random/uuid)
esp_id=$(od -An -N4 -tx4 /dev/urandom | tr -d ' \n' | tr a-f A-F)
esp_uuid="$(echo "$esp_id" | cut -c1-4)-$(echo "$esp_id" | cut -c5-8)"

mkdir -p "$root/boot/efi"
cat >"$root/etc/fstab" <<FSTAB
UUID=$root_uuid / ext4 rw,errors=remount-ro 0 1
UUID=$esp_uuid /boot/efi vfat umask=0077,nofail 0 2
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
# installed (src/debian.rs). Built natively here, so Debian's default
# (MODULES=most) costs seconds and the disk boots on whatever holds it:
# AHCI, NVMe, USB, a SAS HBA or a VM's disk.
rm -f "$root/usr/sbin/update-initramfs"
chroot "$root" dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs
chroot "$root" update-initramfs -c -k all
require_boot_drivers "$root" ext4 sd_mod ahci nvme usb-storage uas xhci-pci virtio_blk virtio_scsi mpt3sas megaraid_sas mptsas
# Later rebuilds happen on the board itself (mdadm.conf, a kernel update),
# where the running hardware is known.
cat >"$root/etc/initramfs-tools/conf.d/nasforge-modules.conf" <<CONF
# nasforge: rebuilt on the board, for the board it runs on
MODULES=dep
CONF

# GRUB as one EFI program with its modules inside: no grub-install, which
# would want the disk as a device and write NVRAM. Its prefix has no device,
# so GRUB reads grub.cfg from the partition it was loaded from. The kernel
# and initramfs are read through Debian's /vmlinuz and /initrd.img links,
# which every kernel package update moves: no update-grub, ever.
esp=$(mktemp -d)
mkdir -p "$esp/EFI/BOOT"
chroot "$root" grub-mkimage -O x86_64-efi -o /tmp/BOOTX64.EFI -p /EFI/BOOT \
	part_gpt part_msdos fat ext2 search search_fs_uuid search_fs_file probe \
	mdraid1x normal configfile linux echo test serial terminal gzio all_video
mv "$root/tmp/BOOTX64.EFI" "$esp/EFI/BOOT/BOOTX64.EFI"
# The serial console as well as the screen: ttyS0 last, so it is
# /dev/console, the one a headless box's log and `nasforge emulate` read.
cat >"$esp/EFI/BOOT/grub.cfg" <<CFG
serial --unit=0 --speed=115200
terminal_input console serial
terminal_output console serial
set timeout=1
# Editing an entry and GRUB's command line are for superusers, and this one
# has no password: nobody gets them. Otherwise `init=/bin/sh`, typed at the
# keyboard or the serial port, boots into a root shell. The entry itself
# boots for anyone.
set superusers="locked"
search --no-floppy --fs-uuid --set=root $root_uuid
set rootuuid=$root_uuid
# A system mirrored at first boot ([storage.system_mirror]) lives on an md
# RAID1 whose root holds this marker, named after the root it replaced
# (engine/src/steps/mirror.rs): this file never changes, on either disk's
# EFI system partition, and the marker is the switch.
if search --no-floppy --file --set=mirror /etc/nasforge/system-mirror.$root_uuid; then
	if probe --set=mirroruuid --fs-uuid \$mirror; then
		set root=\$mirror
		set rootuuid=\$mirroruuid
	fi
fi
menuentry 'Debian GNU/Linux (nasforge)' --unrestricted {
	linux /vmlinuz root=UUID=\$rootuuid ro console=tty0 console=ttyS0,115200n8
	initrd /initrd.img
}
CFG

stage=$(stage_tree "$root")

used=$(du -s -B1M "$stage" | cut -f1)
root_mib=$((used + used / 4 + 512))
esp_mib=256
start=2048
root_start=$((start + esp_mib * 2048))
# 1 MiB before the first partition and 1 MiB after the root for the backup GPT.
truncate -s $((1 + esp_mib + root_mib + 1))M "$img"
printf 'label: gpt\nunit: sectors\n\nstart=%s, size=%s, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI System"\nstart=%s, size=%s, type=4F68BCE3-E8CD-4DB1-96E7-FBCAF984B709, name="nasforge root"\n' \
	"$start" $((esp_mib * 2048)) "$root_start" $((root_mib * 2048)) | sfdisk -q "$img"
mkfs.vfat -F 32 -s 4 -n NFESP -i "$esp_id" --offset "$start" "$img" $((esp_mib * 1024)) >/dev/null
MTOOLS_SKIP_CHECK=1 mcopy -s -i "$img@@$((start * 512))" "$esp/EFI" ::
mke2fs -q -t ext4 -L NFROOT -U "$root_uuid" -d "$stage" -E offset=$((root_start * 512)) "$img" "${root_mib}M"
rm -rf "$esp" "$stage"
