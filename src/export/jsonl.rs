//! JSON lines: one object per row, keys in column order.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context as _;

use super::{Column, Sink};

pub struct Jsonl {
    out: std::io::BufWriter<std::fs::File>,
    names: Vec<&'static str>,
}

impl Jsonl {
    pub fn create(path: &Path) -> anyhow::Result<Jsonl> {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Jsonl {
            out: std::io::BufWriter::new(file),
            names: Vec::new(),
        })
    }

    /// The column names, for the keys: the caller's order is the table's.
    pub fn named(mut self, names: &[&'static str]) -> Jsonl {
        self.names = names.to_vec();
        self
    }
}

impl Sink for Jsonl {
    fn write(&mut self, batch: &[Column]) -> anyhow::Result<()> {
        let rows = batch.first().map_or(0, Column::len);
        for i in 0..rows {
            // Written key by key: a JSON map would sort them, and readers expect the columns'
            // order.
            self.out.write_all(b"{")?;
            for (k, (name, c)) in self.names.iter().zip(batch).enumerate() {
                if k > 0 {
                    self.out.write_all(b",")?;
                }
                serde_json::to_writer(&mut self.out, name)?;
                self.out.write_all(b":")?;
                serde_json::to_writer(&mut self.out, &c.json(i))?;
            }
            self.out.write_all(b"}\n")?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<()> {
        self.out.flush()?;
        Ok(())
    }
}
