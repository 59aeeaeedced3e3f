//! Base images come as .img, .img.xz or .img.gz. The format is read from the
//! first bytes, not the name, so a mislabelled download is still handled (or
//! refused) correctly.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Raw,
    Xz,
    Gz,
}

impl Format {
    pub fn sniff(file: &mut File) -> io::Result<Format> {
        let mut magic = [0u8; 6];
        file.seek(SeekFrom::Start(0))?;
        let n = file.read(&mut magic)?;
        file.seek(SeekFrom::Start(0))?;
        Ok(match &magic[..n] {
            [0xfd, b'7', b'z', b'X', b'Z', 0x00] => Format::Xz,
            [0x1f, 0x8b, ..] => Format::Gz,
            _ => Format::Raw,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Xz => "xz",
            Format::Gz => "gzip",
        }
    }
}

/// Threads are used only while their buffers fit this budget; past it liblzma
/// decodes on one thread, so peak memory stays bounded whatever the image.
const XZ_THREAD_MEMORY: u64 = 48 << 20;

/// A reader of the decompressed bytes. Truncated or corrupt input surfaces
/// as an error from `read` (liblzma: "premature eof"; flate2: UnexpectedEof),
/// never as a short, silently accepted image.
pub fn decoder<'a, R: Read + Send + 'a>(format: Format, input: R) -> io::Result<Box<dyn Read + Send + 'a>> {
    Ok(match format {
        Format::Raw => Box::new(input),
        Format::Xz => {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            let stream = liblzma::stream::MtStreamBuilder::new()
                .threads(threads)
                .memlimit_threading(XZ_THREAD_MEMORY)
                .memlimit_stop(u64::MAX)
                .decoder()
                .map_err(io::Error::other)?;
            Box::new(liblzma::read::XzDecoder::new_stream(input, stream))
        }
        Format::Gz => Box::new(flate2::read::MultiGzDecoder::new(input)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn roundtrip(format: Format) -> Vec<u8> {
        let data: Vec<u8> = (0..300_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let mut packed = Vec::new();
        match format {
            Format::Xz => {
                let mut e = liblzma::write::XzEncoder::new(&mut packed, 1);
                e.write_all(&data).unwrap();
                e.finish().unwrap();
            }
            Format::Gz => {
                let mut e = flate2::write::GzEncoder::new(&mut packed, flate2::Compression::fast());
                e.write_all(&data).unwrap();
                e.finish().unwrap();
            }
            Format::Raw => unreachable!(),
        }
        let mut out = Vec::new();
        decoder(format, &packed[..]).unwrap().read_to_end(&mut out).unwrap();
        assert_eq!(out, data);
        packed
    }

    #[test]
    fn truncated_archives_are_errors_not_short_images() {
        for format in [Format::Xz, Format::Gz] {
            let packed = roundtrip(format);
            let cut = &packed[..packed.len() / 2];
            let mut out = Vec::new();
            let err = decoder(format, cut).unwrap().read_to_end(&mut out).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{format:?}: {err}");
        }
    }

    #[test]
    fn corrupt_archives_are_errors() {
        for format in [Format::Xz, Format::Gz] {
            let mut packed = roundtrip(format);
            let mid = packed.len() / 2;
            for b in &mut packed[mid..mid + 64] {
                *b ^= 0x5a;
            }
            let mut out = Vec::new();
            assert!(decoder(format, &packed[..]).unwrap().read_to_end(&mut out).is_err(), "{format:?}");
        }
    }

    #[test]
    fn sniffs_by_content() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&roundtrip(Format::Xz)).unwrap();
        assert_eq!(Format::sniff(&mut f).unwrap(), Format::Xz);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&[0u8; 512]).unwrap();
        assert_eq!(Format::sniff(&mut f).unwrap(), Format::Raw);
    }
}
