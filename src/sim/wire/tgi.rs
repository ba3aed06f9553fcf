//! Text Generation Inference's native API: `/generate_stream` sends one SSE event per token
//! (`token.text`), the last one with `generated_text` and `details` (`finish_reason`,
//! `generated_tokens`, `input_length`); `/generate` answers whole. The prompt is `inputs`,
//! with no chat template; settings are in `parameters`. The simulator's chunks can hold
//! several tokens (`tokens_per_chunk`): each token is still its own event, as TGI sends them,
//! at the chunk's time. With `timings`, a whole answer's head carries TGI's timing headers.

use serde::Deserialize;
use serde_json::json;

use super::{Ask, Common, Counts, Reply, Wire, from_body};

pub(crate) struct Tgi {
    pub stream: bool,
}

#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    inputs: String,
    #[serde(default)]
    parameters: Parameters,
}

#[derive(Deserialize, Default)]
struct Parameters {
    max_new_tokens: Option<u32>,
}

fn finish(c: &Counts) -> &'static str {
    if c.finish == "length" {
        "length"
    } else {
        "eos_token"
    }
}

fn details(c: &Counts) -> serde_json::Value {
    json!({ "finish_reason": finish(c), "generated_tokens": c.completion, "seed": null, "input_length": c.prompt })
}

impl Wire for Tgi {
    fn ask(&self, body: &[u8]) -> Result<Ask, String> {
        let req: Request = from_body(body)?;
        let mut a = Common::default().ask("inputs");
        a.prompt = req.inputs;
        a.max_tokens = req.parameters.max_new_tokens;
        a.stream = self.stream;
        a.include_usage = true;
        a.thinking = false;
        Ok(a)
    }

    fn chunk(
        &self,
        _r: &Reply<'_>,
        buf: &mut String,
        reasoning: Option<&str>,
        answer: Option<&str>,
    ) {
        // One event per token: the simulator's tokens are its words, each led by a space.
        let words = [reasoning, answer]
            .into_iter()
            .flatten()
            .flat_map(|t| t.split(' '));
        for w in words.filter(|w| !w.is_empty()) {
            let token =
                json!({ "id": 0, "text": format!(" {w}"), "logprob": -0.1, "special": false });
            buf.push_str("data:");
            buf.push_str(
                &json!({ "token": token, "generated_text": null, "details": null }).to_string(),
            );
            buf.push_str("\n\n");
        }
    }

    fn end(&self, _r: &Reply<'_>, buf: &mut String, c: &Counts) {
        // TGI's last event is its last token's; the simulator's is a special token with no
        // text right after the last chunk, carrying the details (a client must take the
        // details from the last event whatever its token).
        let mut last = json!({ "token": { "id": 2, "text": "", "logprob": 0.0, "special": true }, "generated_text": "", "details": null });
        if c.usage {
            last["details"] = details(c);
        }
        buf.push_str("data:");
        buf.push_str(&last.to_string());
        buf.push_str("\n\n");
    }

    fn refused(&self, buf: &mut String, message: &str) {
        buf.push_str("data:");
        buf.push_str(&json!({ "error": message, "error_type": "validation" }).to_string());
        buf.push_str("\n\n");
    }

    fn malformed(&self, _r: &Reply<'_>, buf: &mut String) {
        buf.push_str("data:{\"token\":{\"text\n\n");
    }

    fn whole(
        &self,
        _r: &Reply<'_>,
        reasoning: &str,
        answer: &str,
        c: &Counts,
    ) -> serde_json::Value {
        json!({ "generated_text": format!("{reasoning}{answer}"), "details": details(c) })
    }

    /// TGI's timing headers (`generate_internal`), from the ground truth when the simulator
    /// states timings: whole milliseconds, truncated, as TGI writes them; the simulator does
    /// no validation worth a millisecond, and its inference runs from admission (its batch's
    /// start for this request) to the last token.
    fn head(&self, c: &Counts) -> Vec<(&'static str, String)> {
        let Some(t) = c.timings else {
            return Vec::new();
        };
        let ms = |us: u64| (us / 1000).to_string();
        let inference = t.prefill_us + t.decode_us;
        vec![
            ("x-total-time", ms(t.queue_us + inference)),
            ("x-validation-time", ms(0)),
            ("x-queue-time", ms(t.queue_us)),
            ("x-inference-time", ms(inference)),
            (
                "x-time-per-token",
                ms(inference / u64::from(c.completion.max(1))),
            ),
            ("x-prompt-tokens", c.prompt.to_string()),
            ("x-generated-tokens", c.completion.to_string()),
        ]
    }
}
