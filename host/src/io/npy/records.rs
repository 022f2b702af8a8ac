//! Structured record files (photon lists, the generator's truth): one record per row, written
//! as they come ([`RecordWriter`]).
use std::io::Write;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use super::write::header_bytes;
use crate::error::{Error, Result};
use crate::io::atomic::{AtomicFile, Claim};
use crate::io::write_behind::{DEFAULT_WRITE_THREADS, WriteBehind};

/// A row of a structured `.npy` (a record array): its NumPy `descr` (a `[...]` list of
/// little-endian fields) and its bytes in that layout.
pub trait Record: Copy {
    /// NumPy's descriptor of a row, e.g. `[('frame', '<i8'), ('x', '<f8')]`.
    const DESCR: &'static str;
    /// Appends the row's little-endian bytes (exactly the descriptor's item size) to `out`.
    fn extend_le(&self, out: &mut Vec<u8>);
}

/// Writes rows of a [`Record`] to a 1-D structured `.npy` a batch at a time (the row count
/// goes into the header at the end: the header leaves room for it), under a temporary name
/// until [`RecordWriter::finish`]. The rows are written by threads of their own
/// ([`WriteBehind::positioned`], as a cluster file is), so a caller that appends hundreds of
/// MB of photons spends a copy into a buffer on them, not the file system's write.
pub struct RecordWriter<R: Record> {
    path: PathBuf,
    out: WriteBehind<AtomicFile>,
    rows: usize,
    header_len: usize,
    scratch: Vec<u8>,
    _row: PhantomData<R>,
}

impl<R: Record> RecordWriter<R> {
    /// Starts `path`.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be created.
    pub fn create(path: &Path, claim: Claim) -> Result<Self> {
        let mut file = AtomicFile::create_claiming(path, claim)?;
        let header = header_bytes(R::DESCR, &[0]);
        file.write_all(&header).map_err(|e| Error::io(path, e))?;
        let out = WriteBehind::positioned(file, DEFAULT_WRITE_THREADS, 4)
            .map_err(|e| Error::io(path, e))?;
        Ok(Self {
            path: path.to_path_buf(),
            out,
            rows: 0,
            header_len: header.len(),
            scratch: Vec::new(),
            _row: PhantomData,
        })
    }

    /// Appends rows.
    ///
    /// # Errors
    /// [`Error::Io`] when writing fails.
    pub fn write(&mut self, rows: &[R]) -> Result<()> {
        self.scratch.clear();
        for r in rows {
            r.extend_le(&mut self.scratch);
        }
        self.write_bytes(rows.len())
    }

    /// Appends rows whose in-memory layout is already the file's (a packed, little-endian
    /// `Pod` type on a little-endian machine): no copy.
    ///
    /// # Errors
    /// [`Error::Io`] when writing fails.
    pub fn write_pod(&mut self, rows: &[R]) -> Result<()>
    where
        R: bytemuck::Pod,
    {
        if cfg!(target_endian = "little") {
            self.out
                .write_all(bytemuck::cast_slice(rows))
                .map_err(|e| Error::io(&self.path, e))?;
            self.rows += rows.len();
            Ok(())
        } else {
            self.write(rows)
        }
    }

    fn write_bytes(&mut self, rows: usize) -> Result<()> {
        self.out
            .write_all(&self.scratch)
            .map_err(|e| Error::io(&self.path, e))?;
        self.rows += rows;
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Writes the row count into the header and renames the file into place; its path.
    ///
    /// # Errors
    /// [`Error::Io`] when writing or renaming fails.
    pub fn finish(self) -> Result<PathBuf> {
        use std::io::{Seek, SeekFrom};
        let header = header_bytes(R::DESCR, &[self.rows]);
        if header.len() != self.header_len {
            return Err(Error::Internal("a record header changed length".into()));
        }
        let io = |e| Error::io(&self.path, e);
        let (mut file, _) = self.out.finish().map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&header).map_err(io)?;
        file.commit()
    }
}
