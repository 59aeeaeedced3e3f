#!/usr/bin/env bash
# Regenerates the signature blobs the discovery fixtures write into their
# sparse "device nodes". Each is the first bytes of a real tool's output
# (mkfs.ext4, mkfs.vfat, sfdisk), except the md superblock: mdadm needs the
# kernel's md driver to create one, so md-member.bin is built field by field
# from mdadm's struct mdp_superblock_1 (checksum included) and checked with
# `blkid -p`.
set -euo pipefail
cd "$(dirname "$0")"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

truncate -s 64M "$tmp/ext4.img"
mkfs.ext4 -q -F -L backup -U 3f0f7d0e-5b1c-4e52-9a57-2c1de6a1b0c1 -E lazy_itable_init=1 "$tmp/ext4.img"
head -c 2048 "$tmp/ext4.img" > ext4-backup.bin

truncate -s 64M "$tmp/photos.img"
mkfs.ext4 -q -F -L photos -U 7c9e6679-7425-40de-944b-e07fc1f90ae7 -E lazy_itable_init=1 "$tmp/photos.img"
head -c 2048 "$tmp/photos.img" > ext4-photos.bin

truncate -s 512M "$tmp/fat.img"
mkfs.vfat -F 32 -n bootfs -i 6b0f1a2c "$tmp/fat.img" >/dev/null
head -c 512 "$tmp/fat.img" > fat32-bootfs.bin

truncate -s 240G "$tmp/mbr.img"
printf 'label: dos\nlabel-id: 0x6c2a1b3d\nstart=8192, size=1048576, type=c\nstart=1056768, type=83\n' | sfdisk -q "$tmp/mbr.img"
head -c 512 "$tmp/mbr.img" > mbr-pi-os.bin

python3 - <<'PY'
import struct, uuid
sb = bytearray(256 + 3 * 2)
struct.pack_into("<IIII", sb, 0, 0xa92b4efc, 1, 0, 0)
sb[16:32] = uuid.UUID("5e1f2a3b-4c5d-6e7f-8091-a2b3c4d5e6f7").bytes
sb[32:32 + len(b"oldnas:data")] = b"oldnas:data"
struct.pack_into("<QIIQII", sb, 64, 1700000000, 5, 2, 468596736, 1024, 3)
struct.pack_into("<QQQQ", sb, 128, 264192, 468596736, 8, 0)   # data_offset, data_size, super_offset, recovery
struct.pack_into("<I", sb, 160, 2)                               # dev_number
sb[168:184] = uuid.UUID("0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9").bytes
struct.pack_into("<QQQ", sb, 192, 1700000500, 42, 0xffffffffffffffff)  # utime, events, resync done
struct.pack_into("<I", sb, 220, 3)                               # max_dev
struct.pack_into("<HHH", sb, 256, 0, 1, 2)                       # dev_roles
total = sum(struct.unpack_from("<%dI" % (len(sb) // 4), sb)) + (struct.unpack_from("<H", sb, len(sb) - 2)[0] if len(sb) % 4 else 0)
struct.pack_into("<I", sb, 216, ((total & 0xffffffff) + (total >> 32)) & 0xffffffff)
open("md-member.bin", "wb").write(bytes(sb))
PY
truncate -s 240G "$tmp/md.img"
dd if=md-member.bin of="$tmp/md.img" bs=4096 seek=1 conv=notrunc status=none
blkid -p -o value -s TYPE "$tmp/md.img" | grep -qx linux_raid_member
echo "blobs regenerated; blkid accepts the md superblock"
