//! Apache Parquet through the `parquet` crate's column writers: every column optional (an
//! absent value is a null), integers INT64 annotated UINT_64 (all are counts, indexes or times), reals DOUBLE, text BYTE_ARRAY (UTF8); one row group
//! per batch, snappy-compressed.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use parquet::basic::{Compression, ConvertedType, Repetition, Type as Physical};
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;

use super::{Column, Kind, Sink, Spec};

pub struct Parquet {
    out: SerializedFileWriter<std::fs::File>,
}

impl Parquet {
    pub fn create(path: &Path, columns: &[Spec]) -> anyhow::Result<Parquet> {
        let fields = columns
            .iter()
            .map(|c| {
                let b = match c.kind {
                    // Unsigned, as the values are: INT64 bits annotated UINT_64 (the format's
                    // way), read back as uint64 by pyarrow.
                    Kind::Int => Type::primitive_type_builder(c.name, Physical::INT64)
                        .with_converted_type(ConvertedType::UINT_64),
                    Kind::Float => Type::primitive_type_builder(c.name, Physical::DOUBLE),
                    Kind::Text => Type::primitive_type_builder(c.name, Physical::BYTE_ARRAY)
                        .with_converted_type(ConvertedType::UTF8),
                };
                b.with_repetition(Repetition::OPTIONAL)
                    .build()
                    .map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let schema = Type::group_type_builder("goodput")
            .with_fields(fields)
            .build()?;
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_created_by(format!("goodput {}", env!("CARGO_PKG_VERSION")))
            .build();
        let file =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Parquet {
            out: SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props))?,
        })
    }
}

/// The present values and the definition levels (1 present, 0 null) of a column.
fn levels<T: Clone>(v: &[Option<T>]) -> (Vec<T>, Vec<i16>) {
    let defs = v.iter().map(|x| i16::from(x.is_some())).collect();
    (v.iter().flatten().cloned().collect(), defs)
}

impl Sink for Parquet {
    fn write(&mut self, batch: &[Column]) -> anyhow::Result<()> {
        let mut group = self.out.next_row_group()?;
        for column in batch {
            let mut w = group
                .next_column()?
                .context("more columns than the schema has")?;
            match column {
                Column::Int(v) => {
                    let (values, defs) = levels(v);
                    // The bits of each u64 as INT64 stores them under UINT_64.
                    let values: Vec<i64> = values.into_iter().map(|x| x as i64).collect();
                    w.typed::<Int64Type>()
                        .write_batch(&values, Some(&defs), None)?;
                }
                Column::Float(v) => {
                    let (values, defs) = levels(v);
                    w.typed::<DoubleType>()
                        .write_batch(&values, Some(&defs), None)?;
                }
                Column::Text(v) => {
                    let defs: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                    let values: Vec<ByteArray> = v
                        .iter()
                        .flatten()
                        .map(|s| ByteArray::from(s.as_bytes().to_vec()))
                        .collect();
                    w.typed::<ByteArrayType>()
                        .write_batch(&values, Some(&defs), None)?;
                }
            }
            w.close()?;
        }
        group.close()?;
        Ok(())
    }

    fn finish(self: Box<Self>) -> anyhow::Result<()> {
        self.out.close()?;
        Ok(())
    }
}
