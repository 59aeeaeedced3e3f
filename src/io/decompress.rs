//! Base images come as .img, .img.xz or .img.gz. The format is read from the
//! first bytes, not the name, so a mislabelled download is still handled (or
//! refused) correctly.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;

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
pub fn decoder<'a, R: Read + Send + 'a>(
    format: Format,
    input: R,
) -> io::Result<Box<dyn Read + Send + 'a>> {
    Ok(match format {
        Format::Raw => Box::new(input),
        Format::Xz => Box::new(XzStreams::new(io::BufReader::with_capacity(
            1 << 20,
            input,
        ))?),
        Format::Gz => Box::new(flate2::read::MultiGzDecoder::new(input)),
    })
}

fn xz_stream() -> io::Result<liblzma::stream::Stream> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    liblzma::stream::MtStreamBuilder::new()
        .threads(threads)
        .memlimit_threading(XZ_THREAD_MEMORY)
        .memlimit_stop(u64::MAX)
        .decoder()
        .map_err(io::Error::other)
}

/// Every stream of an .xz file in turn (`xz` itself writes one, but `cat a.xz
/// b.xz` and parallel compressors make several). liblzma's multi-threaded
/// decoder stops after one stream; without this an image would end early,
/// silently. Stream padding between them is skipped; anything else after a
/// stream is an error.
struct XzStreams<R: io::BufRead> {
    current: Option<liblzma::bufread::XzDecoder<R>>,
}

impl<R: io::BufRead> XzStreams<R> {
    fn new(input: R) -> io::Result<Self> {
        Ok(XzStreams {
            current: Some(liblzma::bufread::XzDecoder::new_stream(input, xz_stream()?)),
        })
    }
}

impl<R: io::BufRead> Read for XzStreams<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(dec) = self.current.as_mut() else {
                return Ok(0);
            };
            let n = dec.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let mut input = self.current.take().expect("checked above").into_inner();
            loop {
                let avail = input.fill_buf()?;
                if avail.is_empty() {
                    return Ok(0);
                }
                let zeros = avail.iter().take_while(|b| **b == 0).count();
                if zeros == 0 {
                    break;
                }
                input.consume(zeros);
            }
            if !input
                .fill_buf()?
                .starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0x00])
            {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "data after the end of the xz stream is not another xz stream",
                ));
            }
            self.current = Some(liblzma::bufread::XzDecoder::new_stream(input, xz_stream()?));
        }
    }
}

/// The uncompressed size of an .xz file, read from the index at its end
/// (every stream of a multi-stream file), without decompressing anything.
/// A file cut short has no index there, so a truncated download is found
/// before a single byte is decoded.
pub fn xz_uncompressed_size(file: &File) -> io::Result<u64> {
    let mut pos = file.metadata()?.len();
    if !pos.is_multiple_of(4) {
        return Err(incomplete("its size is not a multiple of 4"));
    }
    let mut total: u64 = 0;
    let mut streams = 0;
    while pos > 0 {
        let mut word = [0u8; 4];
        file.read_exact_at(&mut word, pos - 4)?;
        if word == [0; 4] {
            pos -= 4; // stream padding
            continue;
        }
        (pos, total) = stream_ending_at(file, pos, total)?;
        streams += 1;
    }
    if streams == 0 {
        return Err(incomplete("no stream"));
    }
    Ok(total)
}

fn incomplete(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("not a complete xz file: {what} (truncated or corrupt?)"),
    )
}

/// The stream of an .xz file that ends at `end`, read backwards from its
/// footer through its index to its header: where it starts, and `total`
/// plus its uncompressed size.
fn stream_ending_at(file: &File, end: u64, mut total: u64) -> io::Result<(u64, u64)> {
    if end < 24 {
        return Err(incomplete("no stream footer"));
    }
    let mut footer = [0u8; 12];
    file.read_exact_at(&mut footer, end - 12)?;
    if &footer[10..12] != b"YZ" {
        return Err(incomplete("no stream footer at its end"));
    }
    let index_size = (u32::from_le_bytes(footer[4..8].try_into().unwrap()) as u64 + 1) * 4;
    let index_start = (end - 12)
        .checked_sub(index_size)
        .ok_or_else(|| incomplete("index larger than the file"))?;
    // Streamed rather than loaded: the footer's size field is the file's
    // word and may claim most of it.
    let mut index = io::BufReader::new(ReadAt {
        file,
        pos: index_start,
    })
    .take(index_size)
    .bytes();
    if index.next().transpose()? != Some(0) {
        return Err(incomplete("no index before the stream footer"));
    }
    let mut varint = || -> io::Result<u64> {
        let mut v = 0u64;
        for i in 0..9 {
            let b = index
                .next()
                .ok_or_else(|| incomplete("index ends early"))??;
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(incomplete("index number too long"))
    };
    let records = varint()?;
    let mut blocks: u64 = 0;
    for _ in 0..records {
        let unpadded = varint()?;
        let uncompressed = varint()?;
        blocks = unpadded
            .checked_next_multiple_of(4)
            .and_then(|padded| blocks.checked_add(padded))
            .ok_or_else(|| incomplete("index sizes overflow"))?;
        total = total
            .checked_add(uncompressed)
            .ok_or_else(|| incomplete("index sizes overflow"))?;
    }
    let start = blocks
        .checked_add(12)
        .and_then(|stream| index_start.checked_sub(stream))
        .ok_or_else(|| incomplete("blocks larger than the file"))?;
    let mut header = [0u8; 6];
    file.read_exact_at(&mut header, start)?;
    if header != [0xfd, b'7', b'z', b'X', b'Z', 0x00] {
        return Err(incomplete(
            "the index does not lead back to a stream header",
        ));
    }
    Ok((start, total))
}

/// Reads `file` from `pos` on without moving its shared file position.
struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn roundtrip(format: Format) -> Vec<u8> {
        let data: Vec<u8> = (0..300_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
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
        decoder(format, &packed[..])
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
        packed
    }

    #[test]
    fn truncated_archives_are_errors_not_short_images() {
        for format in [Format::Xz, Format::Gz] {
            let packed = roundtrip(format);
            let cut = &packed[..packed.len() / 2];
            let mut out = Vec::new();
            let err = decoder(format, cut)
                .unwrap()
                .read_to_end(&mut out)
                .unwrap_err();
            assert_eq!(
                err.kind(),
                io::ErrorKind::UnexpectedEof,
                "{format:?}: {err}"
            );
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
            assert!(
                decoder(format, &packed[..])
                    .unwrap()
                    .read_to_end(&mut out)
                    .is_err(),
                "{format:?}"
            );
        }
    }

    #[test]
    fn concatenated_xz_streams_decode_whole_and_trailing_junk_is_an_error() {
        let pack = |data: &[u8]| {
            let mut out = Vec::new();
            let mut e = liblzma::write::XzEncoder::new(&mut out, 1);
            e.write_all(data).unwrap();
            e.finish().unwrap();
            out
        };
        let mut both = pack(b"first stream ");
        both.extend_from_slice(&[0u8; 8]);
        both.extend(pack(b"second stream"));
        let mut out = Vec::new();
        decoder(Format::Xz, &both[..])
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, b"first stream second stream");

        let mut junk = pack(b"data");
        junk.extend_from_slice(b"garbage!");
        let err = decoder(Format::Xz, &junk[..])
            .unwrap()
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
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

    #[test]
    fn xz_size_comes_from_the_index() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 7) as u8).collect();
        let mut packed = Vec::new();
        // Multi-threaded encoding makes several blocks; two streams and
        // stream padding between them, as `cat a.xz b.xz` or pixz make.
        for part in [&data[..1_000_000], &data[1_000_000..]] {
            let stream = liblzma::stream::MtStreamBuilder::new()
                .threads(2)
                .block_size(300_000)
                .preset(1)
                .encoder()
                .unwrap();
            let mut e = liblzma::write::XzEncoder::new_stream(&mut packed, stream);
            e.write_all(part).unwrap();
            e.finish().unwrap();
            packed.extend_from_slice(&[0; 8]);
        }
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&packed).unwrap();
        assert_eq!(xz_uncompressed_size(&f).unwrap(), data.len() as u64);

        let mut cut = tempfile::tempfile().unwrap();
        cut.write_all(&packed[..(packed.len() / 2) & !3]).unwrap();
        let err = xz_uncompressed_size(&cut).unwrap_err();
        assert!(err.to_string().contains("not a complete xz file"), "{err}");
    }
}
