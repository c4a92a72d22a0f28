//! Reading newline-delimited JSON-RPC with a size cap. An over-long line is skipped
//! without being held in memory, and a line that is not UTF-8 is reported: both are
//! answered with an error while the connection keeps working.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest request line accepted (documented in docs/mcp-tools.md).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The error text for a line over the cap (`n` bytes).
pub fn too_long_message(n: usize) -> String {
    format!("Request too long: {n} bytes (the limit is {} MiB per line). Send smaller requests.", MAX_LINE_BYTES >> 20)
}

/// The error text for a line that is not UTF-8.
pub const NOT_UTF8_MESSAGE: &str = "Parse error: the line is not valid UTF-8";

#[derive(Debug, PartialEq)]
pub enum Line {
    Text(String),
    /// Longer than the cap: its bytes were discarded (the count is all of them).
    TooLong(usize),
    NotUtf8,
}

/// The next line (without its newline); `None` at the end of input.
pub async fn next_line<R: AsyncBufRead + Unpin>(reader: &mut R, max: usize) -> std::io::Result<Option<Line>> {
    let mut buf = Vec::new();
    let mut seen = 0usize;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            if seen == 0 {
                return Ok(None);
            }
            break; // a last line without a newline
        }
        let (take, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let content = if done { take - 1 } else { take };
        if seen + content <= max {
            buf.extend_from_slice(&chunk[..content]);
        } else {
            buf = Vec::new(); // over the cap: count the rest, keep none of it
        }
        seen += content;
        reader.consume(take);
        if done {
            break;
        }
    }
    if seen > max {
        return Ok(Some(Line::TooLong(seen)));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(String::from_utf8(buf).map(Line::Text).unwrap_or(Line::NotUtf8)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_and_invalid_lines_are_reported_and_reading_goes_on() {
        let input: Vec<u8> = [&b"ok\n"[..], &[b'x'; 40], b"\n\xff\xfe\nlast"].concat();
        let mut r = tokio::io::BufReader::with_capacity(8, &input[..]);
        assert_eq!(next_line(&mut r, 10).await.unwrap(), Some(Line::Text("ok".into())));
        assert_eq!(next_line(&mut r, 10).await.unwrap(), Some(Line::TooLong(40)));
        assert_eq!(next_line(&mut r, 10).await.unwrap(), Some(Line::NotUtf8));
        assert_eq!(next_line(&mut r, 10).await.unwrap(), Some(Line::Text("last".into())));
        assert_eq!(next_line(&mut r, 10).await.unwrap(), None);
    }
}
