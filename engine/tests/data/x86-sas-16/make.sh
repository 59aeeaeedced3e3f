#!/usr/bin/env bash
# Writes the x86-sas-16 fixture beside this script: a q35 PC (the machine
# `nasforge emulate` boots) with its boot SSD on the chipset's AHCI and two
# LSI SAS1068 HBAs (driver mptsas, what qemu's mptsas1068 is) holding eight
# SATA disks each. Written by hand after the kernel's sysfs layout, not
# captured: the SAS transport class puts `port-H:P/end_device-H:P` between
# an HBA's SCSI host and the target, and libata gives each of the ICH9's six
# ports a SCSI host first (host0-5), so the HBAs are host6 and host7. The
# ids are real chips'; models, serials and WWNs are chosen (WWNs under the
# drive makers' OUIs). Run it again after editing: it rewrites the tree.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf sys run proc etc dev.txt

# An attribute: its value and the newline sysfs ends it with.
attr() {
	mkdir -p "$(dirname "$1")"
	printf '%s\n' "$2" >"$1"
}

link() {
	mkdir -p "$(dirname "$1")"
	ln -s "$2" "$1"
}

pci=sys/devices/pci0000:00

# pci_function ADDRESS VENDOR DEVICE CLASS DRIVER
pci_function() {
	attr "$pci/$1/vendor" "0x$2"
	attr "$pci/$1/device" "0x$3"
	attr "$pci/$1/class" "0x$4"
	link "$pci/$1/driver" "../../../bus/pci/drivers/$5"
	link "sys/bus/pci/devices/$1" "../../../devices/pci0000:00/$1"
	[ -L "sys/bus/pci/drivers/$5/module" ] ||
		link "sys/bus/pci/drivers/$5/module" "../../../../module/$5"
	attr "sys/module/$5/initstate" live
}

# scsi_host DIR N DRIVER: hostN under DIR, named by its driver (proc_name).
scsi_host() {
	attr "$1/host$2/scsi_host/host$2/proc_name" "$3"
	link "sys/class/scsi_host/host$2" "../../${1#sys/}/host$2/scsi_host/host$2"
}

# disk SCSI_DEVICE_DIR NAME MAJOR MINOR SECTORS ROTATIONAL PHYSICAL_BLOCK MODEL16
disk() {
	local b="$1/block/$2"
	attr "$b/dev" "$3:$4"
	attr "$b/size" "$5"
	attr "$b/removable" 0
	attr "$b/queue/rotational" "$6"
	attr "$b/queue/logical_block_size" 512
	attr "$b/queue/physical_block_size" "$7"
	attr "$1/vendor" "ATA     "
	attr "$1/model" "$8"
	link "sys/block/$2" "../${b#sys/}"
	echo "$2" >>dev.txt
}

# udev_ata MAJOR MINOR MODEL SERIAL WWN ID_PATH RPM: udev's record of an ATA
# disk (ata_id runs on SATA disks behind a SAS HBA too: they answer as "ATA").
udev_ata() {
	local model=${3// /_} enc=${3// /\\x20}
	mkdir -p run/udev/data
	cat >"run/udev/data/b$1:$2" <<RECORD
S:disk/by-id/ata-${model}_$4
S:disk/by-id/wwn-$5
S:disk/by-path/$6
I:1000000
E:ID_BUS=ata
E:ID_ATA=1
E:ID_TYPE=disk
E:ID_MODEL=$model
E:ID_MODEL_ENC=$enc\x20\x20\x20\x20
E:ID_SERIAL=${model}_$4
E:ID_SERIAL_SHORT=$4
E:ID_PATH=$6
E:ID_WWN=$5
E:ID_WWN_WITH_EXTENSION=$5
E:ID_ATA_ROTATION_RATE_RPM=$7
G:systemd
V:1
RECORD
}

printf '# device node <TAB> blob@byte-offset ... (sizes come from sysfs)\n' >dev.txt

# The boot SSD on the ICH9's first port, GPT with an ESP and the root.
pci_function 0000:00:1f.2 8086 2922 010601 ahci
ahci=$pci/0000:00:1f.2/ata1
scsi_host "$ahci" 0 ahci
ssd="$ahci/host0/target0:0:0/0:0:0:0"
disk "$ssd" sda 8 0 976773168 0 512 "Samsung SSD 870 "
for p in "1 2048 524288" "2 526336 976246799"; do
	set -- $p
	attr "$ssd/block/sda/sda$1/dev" "8:$1"
	attr "$ssd/block/sda/sda$1/partition" "$1"
	attr "$ssd/block/sda/sda$1/start" "$2"
	attr "$ssd/block/sda/sda$1/size" "$3"
done
udev_ata 8 0 "Samsung SSD 870 EVO 500GB" S6PXNM0T100001A 0x5002538f40000001 pci-0000:00:1f.2-ata-1 0
printf 'E:ID_PART_TABLE_TYPE=gpt\nE:ID_PART_TABLE_UUID=4f2b8d1e-3c5a-4e7f-9a1b-2c3d4e5f6a7b\n' >>run/udev/data/b8:0
printf 'E:ID_FS_TYPE=vfat\nE:ID_FS_USAGE=filesystem\nE:ID_FS_UUID=6B0F-1A2C\nE:ID_FS_LABEL=NFESP\nE:ID_FS_LABEL_ENC=NFESP\n' >run/udev/data/b8:1
printf 'E:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\nE:ID_FS_UUID=9e5c1d2a-7b3f-4c8e-a1d2-3e4f5a6b7c8d\nE:ID_FS_LABEL=NFROOT\nE:ID_FS_LABEL_ENC=NFROOT\n' >run/udev/data/b8:2

# Two SAS1068s, eight direct-attached disks each: WD Reds on the first,
# Seagate IronWolfs on the second. sd majors hold 16 disks: sdq is 65:0.
names=(sdb sdc sdd sde sdf sdg sdh sdi sdj sdk sdl sdm sdn sdo sdp sdq)
i=0
for hba in "0000:00:03.0 6" "0000:00:04.0 7"; do
	set -- $hba
	address=$1 host=$2
	pci_function "$address" 1000 0054 010000 mptsas
	scsi_host "$pci/$address" "$host" mptsas
	for phy in 0 1 2 3 4 5 6 7; do
		name=${names[$i]}
		devnum=$(((i + 1) * 16))
		major=$((devnum < 256 ? 8 : 65)) minor=$((devnum % 256))
		dir="$pci/$address/host$host/port-$host:$phy/end_device-$host:$phy/target$host:0:$phy/$host:0:$phy:0"
		n=$((phy + 1))
		if [ "$host" = 6 ]; then
			disk "$dir" "$name" "$major" "$minor" 7814037168 1 4096 "WDC WD40EFRX-68N"
			udev_ata "$major" "$minor" "WDC WD40EFRX-68N32N0" "WD-WCC7K100000$n" "0x50014ee2c000000$n" \
				"pci-$address-sas-phy$phy-lun-0" 5400
		else
			disk "$dir" "$name" "$major" "$minor" 7814037168 1 4096 "ST4000VN008-2DR1"
			udev_ata "$major" "$minor" "ST4000VN008-2DR166" "ZDH1A00$n" "0x5000c500b000000$n" \
				"pci-$address-sas-phy$phy-lun-0" 5900
		fi
		i=$((i + 1))
	done
done

attr sys/devices/virtual/dmi/id/product_name "Standard PC (Q35 + ICH9, 2009)"
link sys/class/dmi/id ../../devices/virtual/dmi/id
attr "$pci/0000:00:02.0/net/enp0s2/speed" 1000
link "$pci/0000:00:02.0/net/enp0s2/device" ../../../0000:00:02.0
link sys/class/net/enp0s2 ../../devices/pci0000:00/0000:00:02.0/net/enp0s2
mkdir -p sys/devices/virtual/net/lo
link sys/class/net/lo ../../devices/virtual/net/lo

attr etc/hostname pcnas
attr proc/swaps "Filename				Type		Size		Used		Priority"
attr proc/self/mountinfo "22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw,errors=remount-ro
23 22 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
24 22 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
25 22 0:5 / /dev rw,nosuid,relatime shared:8 - devtmpfs udev rw,size=8148132k
31 22 8:1 / /boot/efi rw,relatime shared:20 - vfat /dev/sda1 rw,fmask=0077,dmask=0077"
