//! CRC-16/CCITT-FALSE (also catalogued as CRC-16/IBM-3740): polynomial
//! 0x1021, initial value 0xFFFF, no reflection, no final XOR; the check
//! value of `"123456789"` is 0x29B1.
//!
//! Bitwise rather than table-driven: frames are a few dozen bytes, and a
//! 512-byte table is a poor trade on a small MCU's flash.

const POLY: u16 = 0x1021;
const INIT: u16 = 0xffff;

/// The CRC of `bytes`.
pub const fn crc16(bytes: &[u8]) -> u16 {
    let mut crc = INIT;
    let mut i = 0;
    while i < bytes.len() {
        crc ^= (bytes[i] as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ POLY
            } else {
                crc << 1
            };
            bit += 1;
        }
        i += 1;
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::crc16;

    #[test]
    fn catalogue_check_value() {
        assert_eq!(crc16(b"123456789"), 0x29b1);
        assert_eq!(crc16(b""), 0xffff);
    }
}
