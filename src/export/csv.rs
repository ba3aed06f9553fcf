//! CSV through the `csv` crate (quoting and escaping per RFC 4180).

use std::path::Path;

use anyhow::Context as _;

use super::{Column, Sink, Spec};

pub struct Csv {
    out: csv::Writer<std::io::BufWriter<std::fs::File>>,
}

impl Csv {
    pub fn create(path: &Path, columns: &[Spec]) -> anyhow::Result<Csv> {
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = csv::Writer::from_writer(std::io::BufWriter::new(file));
        out.write_record(columns.iter().map(|c| c.name))?;
        Ok(Csv { out })
    }
}

impl Sink for Csv {
    fn write(&mut self, batch: &[Column]) -> anyhow::Result<()> {
        let rows = batch.first().map_or(0, Column::len);
        for i in 0..rows {
            self.out.write_record(batch.iter().map(|c| c.text(i)))?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> anyhow::Result<()> {
        self.out.flush()?;
        Ok(())
    }
}
