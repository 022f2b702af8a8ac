//! The 112-byte header that precedes every frame in an slsDetector raw data file.
//!
//! Facts (aare 2026.9.30 `include/aare/defs.hpp`, struct `DetectorHeader`; the slsDetector
//! receiver's `sls_receiver_header`): 48 bytes of detector header, then a 64-byte packet mask,
//! all little-endian, no padding. The receiver overwrites `packet_number` with the number of
//! UDP packets it caught for the frame, and sets bit `i` of the mask (byte `i / 8`, bit
//! `i % 8`, the memory layout of a `std::bitset<512>` on little-endian machines) for every
//! packet `i` it caught. A frame with fewer packets than the detector sends is partial.

use bytemuck::{Pod, Zeroable};

/// Size of [`DetectorHeader`] in bytes.
pub const HEADER_BYTES: usize = 112;

/// Bits in the packet mask (the receiver's maximum number of packets per frame).
pub const MASK_BITS: u32 = 512;

/// One frame's header, byte-for-byte as it is stored in the data file.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
pub struct DetectorHeader {
    /// The detector's frame number (starts at 1 in an acquisition; consecutive frames differ
    /// by one unless frames were lost).
    pub frame_number: u64,
    /// Exposure length or sub-frame number (detector specific).
    pub exp_length: u32,
    /// Number of packets the receiver caught for this frame.
    pub packet_number: u32,
    /// Bunch id (detector specific, `detSpec1`).
    pub bunch_id: u64,
    /// Timestamp (detector clock ticks).
    pub timestamp: u64,
    /// Module id.
    pub mod_id: u16,
    /// Row of the module (or UDP port) in the detector.
    pub row: u16,
    /// Column of the module (or UDP port) in the detector.
    pub column: u16,
    /// Reserved (`detSpec2`).
    pub reserved: u16,
    /// Debug word (`detSpec3`).
    pub debug: u32,
    /// Round-robin number (`detSpec4`).
    pub round_r_number: u16,
    /// Detector type code.
    pub det_type: u8,
    /// Header version.
    pub version: u8,
    /// Bit `i` set when packet `i` was caught.
    pub packet_mask: [u8; 64],
}

const _: () = assert!(std::mem::size_of::<DetectorHeader>() == HEADER_BYTES);

impl DetectorHeader {
    /// Reads a header from the first [`HEADER_BYTES`] bytes of `bytes` (little-endian), or
    /// `None` when fewer bytes are given.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let b = bytes.get(..HEADER_BYTES)?;
        let h: Self = bytemuck::pod_read_unaligned(b);
        Some(h.swap_le())
    }

    /// The header as the bytes stored in a file (little-endian).
    pub fn to_bytes(&self) -> [u8; HEADER_BYTES] {
        bytemuck::cast(self.swap_le())
    }

    /// Converts every field between little-endian and native order (a no-op on little-endian
    /// machines; the operation is its own inverse).
    fn swap_le(mut self) -> Self {
        self.frame_number = u64::from_le(self.frame_number);
        self.exp_length = u32::from_le(self.exp_length);
        self.packet_number = u32::from_le(self.packet_number);
        self.bunch_id = u64::from_le(self.bunch_id);
        self.timestamp = u64::from_le(self.timestamp);
        self.mod_id = u16::from_le(self.mod_id);
        self.row = u16::from_le(self.row);
        self.column = u16::from_le(self.column);
        self.reserved = u16::from_le(self.reserved);
        self.debug = u32::from_le(self.debug);
        self.round_r_number = u16::from_le(self.round_r_number);
        self
    }

    /// A header for frame `frame_number` whose first `packets` packets were all caught.
    pub fn complete(frame_number: u64, packets: u32) -> Self {
        let mut h = Self::zeroed();
        h.frame_number = frame_number;
        h.packet_number = packets.min(MASK_BITS);
        for i in 0..h.packet_number {
            h.set_packet(i, true);
        }
        h
    }

    /// Whether packet `i` is marked as caught (false for `i >= 512`).
    pub fn packet(&self, i: u32) -> bool {
        i < MASK_BITS && self.packet_mask[(i / 8) as usize] & (1 << (i % 8)) != 0
    }

    /// Marks packet `i` as caught or lost (ignored for `i >= 512`).
    pub fn set_packet(&mut self, i: u32, caught: bool) {
        if i < MASK_BITS {
            let (byte, bit) = ((i / 8) as usize, 1u8 << (i % 8));
            if caught {
                self.packet_mask[byte] |= bit;
            } else {
                self.packet_mask[byte] &= !bit;
            }
        }
    }

    /// Number of packets marked as caught in the mask.
    pub fn mask_count(&self) -> u32 {
        self.packet_mask.iter().map(|b| b.count_ones()).sum()
    }

    /// Whether the frame is complete: with `expected` packets per frame known, all of packets
    /// `0..expected` are in the mask and `packet_number >= expected`; without it, the mask
    /// agrees with `packet_number` and has no hole (every bit below the highest set bit set).
    pub fn is_complete(&self, expected: Option<u32>) -> bool {
        match expected {
            Some(e) => self.packet_number >= e && (0..e.min(MASK_BITS)).all(|i| self.packet(i)),
            None => {
                let n = self.mask_count();
                n == self.packet_number && (n == 0 || (0..n).all(|i| self.packet(i)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_offsets_match_the_receiver_header() {
        let mut h = DetectorHeader::zeroed();
        h.frame_number = 0x0102_0304_0506_0708;
        h.packet_number = 50;
        h.row = 7;
        h.version = 2;
        h.set_packet(9, true);
        let b = h.to_bytes();
        assert_eq!(&b[0..8], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&b[12..16], &50u32.to_le_bytes());
        assert_eq!(&b[34..36], &7u16.to_le_bytes());
        assert_eq!(b[47], 2);
        assert_eq!(b[48 + 1], 0b10);
        assert_eq!(DetectorHeader::from_bytes(&b), Some(h));
        assert_eq!(DetectorHeader::from_bytes(&b[..111]), None);
    }

    #[test]
    fn completeness() {
        let h = DetectorHeader::complete(5, 50);
        assert!(h.is_complete(Some(50)));
        assert!(h.is_complete(None));
        assert!(!h.is_complete(Some(51)));
        let mut lost = h;
        lost.set_packet(17, false);
        lost.packet_number = 49;
        assert!(!lost.is_complete(Some(50)));
        assert!(!lost.is_complete(None), "a hole in the mask is partial");
        assert!(DetectorHeader::zeroed().is_complete(None));
    }
}
