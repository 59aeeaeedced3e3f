//! How the storage reaches the network: Samba shares and passwords, NFS
//! exports, and the avahi announcement Macs and Linux desktops browse.

pub mod avahi;
pub mod nfs;
pub mod samba;
pub mod smbpasswd;
