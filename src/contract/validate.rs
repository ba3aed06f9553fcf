//! Validation: one function per section of the contract, each checking its keys (and their
//! combinations) and filling the defaults that depend on other sections. Errors are a key
//! and a message; `contract::parse` locates the key in the file.

use super::*;

/// The longest pause between a user's requests (`load.think_time`, sessions' `think_ms`).
const MAX_THINK_S: f64 = 3600.0;
/// The largest `extra_body` (as JSON) a request may carry besides what goodput builds.
const MAX_EXTRA_BODY_BYTES: usize = 256 << 10;
/// The longest header value written in a contract.
const MAX_HEADER_VALUE_BYTES: usize = 8 << 10;
/// The longest contract `name` (a directory name, with room for what is appended to it).
const MAX_NAME_LEN: usize = 128;
/// The most requests one run's measured phase may plan.
const MAX_REQUESTS: u64 = 100_000_000;

pub(super) type Problem = (String, String);

pub(super) fn problem(key: &str, msg: impl Into<String>) -> Result<(), Problem> {
    Err((key.to_owned(), msg.into()))
}

impl Contract {
    /// What the target's API cannot do (`api::Capabilities`): a key the contract's text sets
    /// (`written`) that asks for it is an error naming the key; a default that would ask for it
    /// is turned off, so the bundle's contract says what was sent.
    /// One warm-up rule: `until_stable` decides when warm-up ends, so a `requests` or
    /// `duration` written beside it (even `requests = 0`, "no warm-up") would be ignored.
    pub(super) fn one_warmup_rule(&self, written: &dyn Fn(&str) -> bool) -> Result<(), Problem> {
        if self.warmup.until_stable.is_none() {
            return Ok(());
        }
        for key in ["warmup.requests", "warmup.duration"] {
            if written(key) {
                return problem(
                    key,
                    "set one warm-up rule: [warmup.until_stable] ends warm-up when TTFT settles (its max_requests bounds it), and this key beside it would be ignored",
                );
            }
        }
        Ok(())
    }

    pub(super) fn api_limits(&mut self, written: &dyn Fn(&str) -> bool) -> Result<(), Problem> {
        let api = self.target.api;
        let can = api.capabilities();
        let name = api.name();
        let w = &mut self.workload;
        if w.batch == 0 {
            return problem("workload.batch", "must be at least 1");
        }
        if let Err(msg) = api.check_batch(w.batch) {
            return problem("workload.batch", msg.to_string());
        }
        if !can.generates && self.quality.mode != QualityMode::None {
            return problem(
                "quality.mode",
                format!(
                    "api = \"{name}\" generates no text to compare or score: set it to \"none\""
                ),
            );
        }
        if !can.streams && w.stream {
            if written("workload.stream") {
                return problem(
                    "workload.stream",
                    format!(
                        "api = \"{name}\" answers whole, never streamed: set it to false or leave it out"
                    ),
                );
            }
            w.stream = false;
        }
        if !can.exact_output && w.enforce_output_length {
            if written("workload.enforce_output_length") {
                return problem(
                    "workload.enforce_output_length",
                    format!(
                        "api = \"{name}\" has no field that asks for an exact output length (ignore_eos, min_tokens): set it to false (output lengths then end where the model stops), or pass the engine's own field through target.request.extra_body"
                    ),
                );
            }
            w.enforce_output_length = false;
        }
        Ok(())
    }

    /// Validates every value and fills what depends on other fields.
    pub fn resolve(&mut self) -> Result<(), Problem> {
        self.name_and_target()?;
        self.workload_and_sampling()?;
        self.load()?;
        self.sessions()?;
        self.tasks()?;
        self.images()?;
        self.stop_and_warmup()?;
        self.slo_prediction_repeat()?;
        self.measurement_and_quality()?;
        self.cold_start()?;
        self.request_extras()?;
        self.sharding()?;
        self.edge_search()?;
        Ok(())
    }

    /// `[workload.images]`: its own checks, and an API that sends images.
    fn images(&self) -> Result<(), Problem> {
        let Some(i) = &self.workload.images else {
            return Ok(());
        };
        i.check()?;
        if self.workload.sessions.is_some() || self.workload.task.is_some() {
            return problem(
                "workload.images",
                "images go in single requests for now: a session's later turns or a task's calls would have to send them again in their history, which goodput does not yet do",
            );
        }
        if let Err(why) = self.target.api.check_images(i.most()) {
            return problem("workload.images", why.to_string());
        }
        Ok(())
    }

    /// An edge search (`shape = "edge"`) judges each step against the SLO as the requests of
    /// one arrival finish, so it needs an SLO, one client (no shards), and requests that are
    /// one arrival each (no sessions); it runs to its own end (no `[measurement.stop]`).
    fn edge_search(&self) -> Result<(), Problem> {
        if self.load.edge().is_none() {
            return Ok(());
        }
        let key = stages::key(self.load.stage.len() - 1, "shape");
        let why = if !self.has_slo() {
            "an edge search finds the highest rate that meets the SLO: add an [slo]"
        } else if self.load.shard.is_some() {
            "an edge search is steered by one client's verdicts: it cannot be cut into shards"
        } else if self.workload.sessions.is_some() {
            "an edge search judges each step as its requests finish, and a session's turns outlive it: run sessions at fixed stages"
        } else if self.measurement.stop.is_some() {
            "an edge search decides its own steps' length: leave [measurement.stop] out"
        } else {
            return Ok(());
        };
        problem(&key, why)
    }

    /// `load.shard` and `load.start_at`: a shard of an open-loop plan whose phases every shard
    /// can label alike, started at one instant. A warm-up that ends when TTFT settles is decided
    /// by each client's own answers, and a cold start by the one client that launched the server,
    /// so neither can be cut into shards.
    fn sharding(&self) -> Result<(), Problem> {
        let l = &self.load;
        if l.shard.is_none() {
            if l.start_at.is_some() {
                return problem(
                    "load.start_at",
                    "applies to a sharded run only (load.shard, or goodput run --shard I/N)",
                );
            }
            return Ok(());
        };
        if !l.is_open() {
            return problem(
                "load.shard",
                "applies to an open loop only: a closed loop has no schedule to cut (run N clients with concurrency / N each, and say so)",
            );
        }
        if l.start_at.is_none() {
            return problem(
                "load.start_at",
                "missing: a sharded run needs the common start instant of every shard (goodput run --start-at 2026-12-02T06:00:00Z)",
            );
        }
        if self.warmup.until_stable.is_some() {
            return problem(
                "warmup.until_stable",
                "cannot be sharded: each client would decide from its own answers when warm-up ends, and the shards' phases would differ (use warmup.requests or warmup.duration)",
            );
        }
        if self.cold_start.is_some() {
            return problem(
                "cold_start",
                "cannot be sharded: one client measures a cold start (run it unsharded first)",
            );
        }
        Ok(())
    }

    /// `[target.request]`: header names that are valid and not goodput's own, environment
    /// variable *names*, and body fields that do not collide with one goodput sets for this
    /// contract (it composes the body from the workload, so the workload decides which).
    fn request_extras(&self) -> Result<(), Problem> {
        self.check_extras("target.request", &self.target.request)
    }

    /// One extra header: a valid name and value, not one goodput, the HTTP client or the API's
    /// key sets, and an environment variable's name (not its value) where it reads one.
    fn check_header(&self, key: &str, name: &str, v: &HeaderSource) -> Result<(), Problem> {
        if let HeaderSource::Value(v) = v
            && v.len() > MAX_HEADER_VALUE_BYTES
        {
            return problem(
                key,
                format!(
                    "is {} long; at most {} (servers refuse larger headers, often as 431)",
                    crate::text::human_bytes(v.len() as u64),
                    crate::text::human_bytes(MAX_HEADER_VALUE_BYTES as u64)
                ),
            );
        }
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return problem(key, "is not a valid HTTP header name");
        }
        let lower = name.to_ascii_lowercase();
        let adapter = self.target.api.adapter();
        let api_sets = adapter.headers().iter().any(|(h, _)| *h == lower);
        let key_header = matches!(adapter.auth(), crate::api::Auth::Header(h) if h == lower);
        let own = match lower.as_str() {
            "content-type" | "content-length" | "transfer-encoding" | "host" | "connection" => {
                Some("the HTTP client sets it")
            }
            "x-request-id" => Some("goodput sets it to match requests with server logs"),
            "traceparent" if self.measurement.propagates_traces() => Some(
                "goodput sets it to join the engine's spans to each request (measurement.traces.propagate = false leaves it to you)",
            ),
            _ if api_sets => Some("the API's adapter sets it (target.api)"),
            _ if key_header && self.target.api_key_env.is_some() => {
                Some("target.api_key_env sets it for this API")
            }
            "authorization" if self.target.api_key_env.is_some() => {
                Some("target.api_key_env sets it")
            }
            _ => None,
        };
        if let Some(why) = own {
            return problem(key, format!("cannot be set here: {why}"));
        }
        match v {
            HeaderSource::Env { env } if env.is_empty() || env.contains('=') => {
                return problem(
                    &format!("{key}.env"),
                    "must be the *name* of an environment variable, not its value",
                );
            }
            HeaderSource::Value(v) if reqwest::header::HeaderValue::from_str(v).is_err() => {
                return problem(key, "is not a valid HTTP header value (visible ASCII only)");
            }
            _ => {}
        }
        Ok(())
    }

    /// `[target.request]` or a class's `request`, named under `prefix`.
    fn check_extras(&self, prefix: &str, r: &RequestExtras) -> Result<(), Problem> {
        // Every request carries these: their size is paid per request in flight.
        let body_bytes = serde_json::to_vec(&r.extra_body).map_or(0, |v| v.len());
        if body_bytes > MAX_EXTRA_BODY_BYTES {
            return problem(
                &format!("{prefix}.extra_body"),
                format!(
                    "is {} as JSON; at most {} (it is sent with every request: a long prompt belongs in the workload, where its length is planned and counted)",
                    crate::text::human_bytes(body_bytes as u64),
                    crate::text::human_bytes(MAX_EXTRA_BODY_BYTES as u64)
                ),
            );
        }
        for (name, v) in &r.headers {
            self.check_header(&format!("{prefix}.headers.{name}"), name, v)?;
        }
        if r.extra_body.is_empty() {
            return Ok(());
        }
        let sets = crate::api::body_keys(
            self.target.api,
            &crate::api::RequestSpec {
                model: "m",
                prompt: "",
                messages: None,
                max_tokens: 1,
                stream: self.workload.stream,
                exact_output: self.workload.enforce_output_length,
                sampling: &self.workload.sampling,
                batch: self.workload.batch,
                extra: None,
                images: &[],
                tools: None,
            },
        );
        let mut extra = Vec::new();
        crate::api::leaf_paths(
            &serde_json::Value::Object(r.extra_body.clone()),
            String::new(),
            &mut extra,
        );
        // A field collides when it is one goodput sets, holds one (a table in its place), or
        // lies inside one that is not a table.
        let inside = |a: &str, b: &str| a.strip_prefix(b).is_some_and(|t| t.starts_with('.'));
        let collision = extra.iter().find_map(|k| {
            sets.iter()
                .find(|s| *s == k || inside(s, k) || inside(k, s))
                .map(|s| (k, s))
        });
        if let Some((k, _)) = collision {
            return problem(
                &format!("{prefix}.extra_body.{k}"),
                format!(
                    "`{k}` is a field goodput sets itself for this contract (it sets {}); change it through the contract's own key instead",
                    sets.join(", ")
                ),
            );
        }
        Ok(())
    }

    /// `[cold_start]`: a launch command to run, and a server it can reach.
    fn cold_start(&mut self) -> Result<(), Problem> {
        let Some(cs) = &self.cold_start else {
            return Ok(());
        };
        // Where a server's tokens go (`HF_TOKEN`): secrets from the moment they are read.
        for v in cs.env.values() {
            crate::secrets::register(v);
        }
        if let Some(l) = &cs.launch {
            if l.first().is_none_or(|p| p.trim().is_empty()) {
                return problem(
                    "cold_start.launch",
                    "is empty: give the command and its arguments, e.g. [\"vllm\", \"serve\", \"MODEL\", \"--port\", \"{port}\"]",
                );
            }
            if self.target.url.is_none() {
                return problem(
                    "cold_start.launch",
                    "needs target.url (e.g. \"http://127.0.0.1:{port}\"): without it the run would time a server it never contacts",
                );
            }
        }
        for (k, v) in [
            ("cold_start.ready_timeout", cs.ready_timeout.0),
            ("cold_start.stop_grace", cs.stop_grace.0),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return problem(k, "must be >= 0 seconds");
            }
        }
        Ok(())
    }

    /// Checks the workload's keys against each other and fills the length defaults that
    /// depend on the prompt source and arrival process. (Files are read by `parse`.)
    fn resolve_workload(&mut self) -> Result<(), Problem> {
        let trace = self.load.arrival == Some(Arrival::Trace);
        let w = &mut self.workload;
        let dataset = w.prompt_source == PromptSource::Dataset;
        // Dataset prompts keep their own lengths, also when a trace times them.
        let input = w
            .input_tokens
            .get_or_insert_with(|| match (dataset, trace) {
                (true, _) => LengthDist::Dataset,
                (false, true) => LengthDist::Trace,
                (false, false) => default_input(),
            });
        let output = w.output_tokens.get_or_insert_with(|| {
            if trace {
                LengthDist::Trace
            } else {
                default_output()
            }
        });
        for (key, d) in [
            ("workload.input_tokens", &*input),
            ("workload.output_tokens", &*output),
        ] {
            length_source(key, d, trace, dataset, w.dataset.is_some())?;
        }
        if dataset && *input != LengthDist::Dataset {
            return problem(
                "workload.input_tokens",
                "dataset prompts have their own lengths: leave input_tokens out (or dist = \"dataset\"); for synthetic prompts with a dataset's lengths use prompt_source = \"synthetic\" and dist = \"empirical\"",
            );
        }
        let uses_dataset = dataset
            || [&*input, &*output]
                .iter()
                .any(|d| matches!(d, LengthDist::Empirical { file: None, .. }));
        match (&w.dataset, uses_dataset) {
            (None, true) => {
                return problem(
                    "workload.dataset",
                    "missing: prompt_source = \"dataset\" needs a dataset file (JSONL or ShareGPT)",
                );
            }
            (Some(_), false) => {
                return problem(
                    "workload.dataset",
                    "is not used: set prompt_source = \"dataset\", or take lengths from it with dist = \"empirical\"",
                );
            }
            _ => {}
        }
        if w.dataset_format.is_some() && w.dataset.is_none() {
            return problem(
                "workload.dataset_format",
                "applies to workload.dataset only",
            );
        }
        if let Some(n) = &w.cache_nonce
            && !(1..=16).contains(&n.len()) | !n.chars().all(|c| c.is_ascii_hexdigit())
        {
            return problem(
                "workload.cache_nonce",
                format!(
                    "= \"{n}\": must be 1 to 16 hex digits (goodput run writes one; leave it out)"
                ),
            );
        }
        let input = input.clone();
        prefix_cache(w, &input)
    }

    /// `[workload.task]`: nodes written in the contract or a graph file (not both), sent by an
    /// open-loop arrival process of synthetic prompts over an API that sends chat messages; an
    /// `[slo] task_ms` needs tasks.
    fn tasks(&self) -> Result<(), Problem> {
        let Some(t) = &self.workload.task else {
            if self.slo.task_ms.is_some() {
                return problem("slo.task_ms", "judges agent tasks: add a [workload.task]");
            }
            return Ok(());
        };
        let why = match (t.graph.is_some(), t.node.is_empty()) {
            (true, false) => Some("names a graph file and has nodes of its own: keep one"),
            (false, true) => {
                Some("needs its nodes: [[workload.task.node]] entries, or graph = \"FILE.jsonl\"")
            }
            _ if self.workload.sessions.is_some() => Some(
                "cannot be combined with [workload.sessions] (a session is a task whose calls form one chain: write it as one)",
            ),
            _ if self.load.kind == Some(LoadModel::Closed) => Some(
                "needs an open-loop load (load.kind = \"open\"): tasks arrive at load.rate and each later call is timed from the calls it waits for",
            ),
            _ if self.load.arrival == Some(Arrival::Trace) => Some(
                "cannot be combined with load.arrival = \"trace\" (trace rows are single requests)",
            ),
            _ if self.workload.prompt_source == PromptSource::Dataset => Some(
                "builds its prompts from the calls' outputs and new synthetic tokens: leave prompt_source at \"synthetic\"",
            ),
            _ if !self.classes.is_empty() => Some(
                "[[class]] and [workload.task] cannot be combined yet: a class is a share of single requests",
            ),
            _ if self.load.shard.is_some() => Some("cannot be cut into shards yet"),
            _ if self.load.edge().is_some() => Some(
                "an edge search judges each step as its requests finish, and a task's calls outlive it: run tasks at fixed stages",
            ),
            _ => None,
        };
        if let Some(why) = why {
            return problem("workload.task", why);
        }
        if !self.target.api.capabilities().messages {
            return problem(
                "workload.task",
                format!(
                    "sends each call's conversation as chat messages, which api = \"{}\" cannot",
                    self.target.api.name()
                ),
            );
        }
        Ok(())
    }

    /// `[workload.sessions]`: whole numbers of turns and milliseconds, an open-loop arrival
    /// process of synthetic prompts, and an API that sends chat messages.
    fn sessions(&self) -> Result<(), Problem> {
        let Some(s) = &self.workload.sessions else {
            return Ok(());
        };
        check_dist("workload.sessions.turns", &s.turns)?;
        let dataset = self.workload.prompt_source == PromptSource::Dataset;
        if dataset && s.follow_up != FollowUp::Prose {
            return problem(
                "workload.sessions.follow_up",
                "applies to synthetic sessions: a dataset's conversations send their own messages",
            );
        }
        let most = match &s.turns {
            LengthDist::Fixed { value } if !dataset => *value,
            LengthDist::Uniform { max, .. }
            | LengthDist::Normal { max, .. }
            | LengthDist::Lognormal { max, .. }
                if !dataset =>
            {
                *max
            }
            LengthDist::Dataset if dataset => MAX_TURNS,
            _ if dataset => {
                return problem(
                    "workload.sessions.turns",
                    "a dataset's conversations have their own turns: set turns = { dist = \"dataset\" }",
                );
            }
            _ => {
                return problem(
                    "workload.sessions.turns",
                    "must be fixed, uniform, normal or lognormal turns, or { dist = \"dataset\" } with prompt_source = \"dataset\"",
                );
            }
        };
        if most > MAX_TURNS {
            return problem(
                "workload.sessions.turns",
                format!("allows {most} turns; at most {MAX_TURNS}"),
            );
        }
        if let Some(d) = &s.think_ms {
            think_time(d)?;
        }
        if self.load.kind == Some(LoadModel::Closed) {
            return problem(
                "workload.sessions",
                "need an open-loop load (load.kind = \"open\"): sessions arrive at load.rate and each follow-up turn is timed from the answer before it",
            );
        }
        if self.load.arrival == Some(Arrival::Trace) {
            return problem(
                "workload.sessions",
                "cannot be combined with load.arrival = \"trace\" (trace rows are single requests)",
            );
        }
        if !self.target.api.capabilities().messages {
            return problem(
                "workload.sessions",
                format!(
                    "send the conversation as chat messages, which api = \"{}\" cannot",
                    self.target.api.name()
                ),
            );
        }
        Ok(())
    }

    /// `name` and `[target]`: a URL or the simulator, never both; timeouts.
    /// `[target.telemetry]` and the declared accelerators and price: what the efficiency
    /// figures are computed from.
    fn efficiency_inputs(&self) -> Result<(), Problem> {
        let t = &self.target.telemetry;
        for (i, u) in t.urls.iter().enumerate() {
            let ok = u.starts_with('/')
                || (u.starts_with("http://") || u.starts_with("https://"))
                    && reqwest::Url::parse(u).is_ok();
            if !ok {
                return problem(
                    &format!("target.telemetry.urls[{i}]"),
                    format!(
                        "`{u}` must be an http:// or https:// URL (a DCGM exporter's is http://HOST:9400/metrics) or a path on the target's host starting with /"
                    ),
                );
            }
        }
        if let Some(every) = t.interval {
            if t.urls.is_empty() {
                return problem(
                    "target.telemetry.interval",
                    "is set but target.telemetry.urls lists no page to scrape",
                );
            }
            if !(every.0.is_finite() && every.0 >= 0.05) {
                return problem("target.telemetry.interval", "must be at least 50ms");
            }
        }
        let d = &self.target.declared;
        if d.accelerators == Some(0) {
            return problem("target.declared.accelerators", "must be at least 1");
        }
        if let Some(p) = d.price_per_hour {
            if !(p.is_finite() && p > 0.0) {
                return problem(
                    "target.declared.price_per_hour",
                    format!(
                        "= {p}: must be a positive number, what the deployment costs per hour in `currency`"
                    ),
                );
            }
            match &d.currency {
                None => {
                    return problem(
                        "target.declared.price_per_hour",
                        "needs target.declared.currency beside it (\"USD\", \"EUR\", …): a cost without its currency cannot be compared",
                    );
                }
                Some(c) if c.trim().is_empty() || c.chars().any(char::is_whitespace) => {
                    return problem(
                        "target.declared.currency",
                        "must be a currency code such as \"USD\"",
                    );
                }
                Some(_) => {}
            }
        } else if d.currency.is_some() {
            return problem(
                "target.declared.currency",
                "is set but target.declared.price_per_hour is not",
            );
        }
        Ok(())
    }

    fn name_and_target(&mut self) -> Result<(), Problem> {
        // A password in the URL is a secret from the moment it is read (crate::secrets).
        if let Some(u) = &self.target.url {
            crate::secrets::register_url(u);
        }
        self.replicas()?;
        check_name(&self.name)?;
        match (&self.target.url, &mut self.target.simulator) {
            (Some(url), Some(_)) => {
                return problem(
                    "target.simulator",
                    format!(
                        "configures the embedded simulator, but target.url ({url}) names an external server; remove one of them"
                    ),
                );
            }
            (Some(url), None) => {
                check_url(url, &self.target.tls)?;
            }
            (None, sim) => {
                let cfg = sim.get_or_insert_with(SimConfig::default);
                if let Err(e) = cfg.validate() {
                    return problem(
                        &format!("target.simulator.{}", e.key),
                        format!("= {}: {}", e.value, e.rule),
                    );
                }
                match &self.target.model {
                    Some(m) if *m != cfg.model => {
                        return problem(
                            "target.model",
                            format!(
                                "`{m}` differs from the simulator's model `{}` (set target.simulator.model)",
                                cfg.model
                            ),
                        );
                    }
                    _ => self.target.model = Some(cfg.model.clone()),
                }
            }
        }
        if let Some(var) = &self.target.api_key_env
            && (var.is_empty() || var.contains('='))
        {
            return problem(
                "target.api_key_env",
                "must be the *name* of an environment variable, not the key",
            );
        }
        if !(self.target.timeout.0.is_finite() && self.target.timeout.0 > 0.0) {
            return problem("target.timeout", "must be > 0");
        }
        self.efficiency_inputs()?;
        if self.target.max_connect_failures == 0 {
            return problem(
                "target.max_connect_failures",
                "must be at least 1 (consecutive connection failures that end the run)",
            );
        }
        if !(self.target.keep_alive.0.is_finite() && self.target.keep_alive.0 >= 0.0) {
            return problem(
                "target.keep_alive",
                "must be >= 0 (0 = a new connection per request)",
            );
        }
        Ok(())
    }

    /// `[workload]` (its keys against each other, length defaults) and its sampling.
    fn workload_and_sampling(&mut self) -> Result<(), Problem> {
        self.resolve_workload()?;
        let s = &self.workload.sampling;
        if !(s.temperature.is_finite() && s.temperature >= 0.0) {
            return problem("workload.sampling.temperature", "must be >= 0");
        }
        if !(s.top_p > 0.0 && s.top_p <= 1.0) {
            return problem("workload.sampling.top_p", "must be in (0, 1]");
        }
        Ok(())
    }

    /// `[load]`: the load model (the old `model` key noted), its own keys only, their defaults.
    fn load(&mut self) -> Result<(), Problem> {
        let l = &mut self.load;
        if let Some(old) = l.model.take() {
            if l.kind.is_some_and(|k| k != old) {
                return problem(
                    "load.model",
                    "contradicts load.kind (load.model is the old name of load.kind: keep one)",
                );
            }
            l.kind = Some(old);
            self.notes.push("load.model".to_owned());
        }
        let l = &mut self.load;
        let kind = *l.kind.get_or_insert(
            if l.concurrency.is_some() && l.rate.is_none() && l.arrival.is_none() {
                LoadModel::Closed
            } else {
                LoadModel::Open
            },
        );
        if !l.stage.is_empty() {
            return program(l);
        }
        match kind {
            LoadModel::Open => open_load(l)?,
            LoadModel::Closed => self.closed_load()?,
        }
        Ok(())
    }

    /// A closed loop: its own keys only; latency from the actual send (it has no schedule).
    fn closed_load(&mut self) -> Result<(), Problem> {
        let l = &mut self.load;
        for (k, set) in [
            ("rate", l.rate.is_some()),
            ("arrival", l.arrival.is_some()),
            ("burstiness", l.burstiness.is_some()),
            ("max_in_flight", l.max_in_flight.is_some()),
            ("trace", l.trace.is_some()),
            ("speedup", l.speedup.is_some()),
            ("trace_block_tokens", l.trace_block_tokens.is_some()),
        ] {
            if set {
                return problem(
                    &format!("load.{k}"),
                    "applies to load.kind = \"open\" only (a closed loop has no schedule)",
                );
            }
        }
        match l.concurrency {
            None => {
                return problem(
                    "load.concurrency",
                    "missing: a closed-loop load needs a concurrency",
                );
            }
            Some(0) => return problem("load.concurrency", "must be >= 1"),
            Some(_) => {}
        }
        let t = l.think_time.get_or_insert_default().0;
        if !(t.is_finite() && t >= 0.0) {
            return problem("load.think_time", "must be >= 0");
        }
        if t > MAX_THINK_S {
            return problem(
                "load.think_time",
                format!("is {t} s; at most {MAX_THINK_S} s (an hour) between a user's requests"),
            );
        }
        if self.measurement.latency_origin == LatencyOrigin::Intended {
            // A closed loop has no schedule: its only honest origin is the actual send.
            self.measurement.latency_origin = LatencyOrigin::Sent;
        }
        Ok(())
    }

    /// When the measured phase ends, and `[warmup]`.
    fn stop_and_warmup(&mut self) -> Result<(), Problem> {
        match (self.load.requests(), self.load.duration()) {
            // A trace without a bound is replayed to its end (the bound is filled when it is read).
            (None, None) if self.load.arrival == Some(Arrival::Trace) => {}
            // A program's stages end the measured phase.
            (None, None) if !self.load.stage.is_empty() => {}
            (None, None) => {
                return problem(
                    "load",
                    "set `requests` or `duration` to say when the measured phase ends",
                );
            }
            (Some(_), Some(_)) => {
                return problem("load.duration", "set `requests` or `duration`, not both");
            }
            (Some(0), _) => return problem("load.requests", "must be >= 1"),
            (Some(n), _) if n > MAX_REQUESTS => {
                return problem(
                    "load.requests",
                    format!(
                        "is {n}; at most {MAX_REQUESTS} (each request's record is about a kilobyte: split a longer run, or set load.duration)"
                    ),
                );
            }
            (_, Some(d)) if !(d.0.is_finite() && d.0 > 0.0) => {
                return problem("load.duration", "must be > 0");
            }
            (_, Some(d)) if d.seconds() > super::MAX_DURATION_S => {
                return problem(
                    "load.duration",
                    format!(
                        "is {} s; at most {} s (a week): split a longer soak into runs",
                        d.seconds(),
                        super::MAX_DURATION_S
                    ),
                );
            }
            _ => {}
        }
        if self.warmup.requests > 0 && self.warmup.duration.is_some() {
            return problem(
                "warmup.duration",
                "set warm-up `requests` or `duration`, not both",
            );
        }
        if let Some(d) = self.warmup.duration
            && !(d.0.is_finite() && d.0 >= 0.0)
        {
            return problem("warmup.duration", "must be >= 0");
        }
        if let Some(d) = self.warmup.duration
            && d.seconds() > super::MAX_DURATION_S
        {
            return problem(
                "warmup.duration",
                format!(
                    "is {} s; at most {} s (a week)",
                    d.seconds(),
                    super::MAX_DURATION_S
                ),
            );
        }
        if let Some(u) = &self.warmup.until_stable {
            if u.window == 0 {
                return problem(
                    "warmup.until_stable.window",
                    "must be >= 1 (finished warm-up requests per median compared)",
                );
            }
            if !(u.threshold.is_finite() && u.threshold >= 0.0) {
                return problem(
                    "warmup.until_stable.threshold",
                    "must be >= 0 (a relative change, e.g. 0.05; 0 = until max_requests)",
                );
            }
        }
        Ok(())
    }

    /// `[slo]`, `[prediction]` and `[repeat]`.
    /// One SLO's values (`[slo]`, or a class's), named under `prefix`.
    fn check_slo(&self, prefix: &str, slo: &Slo) -> Result<(), Problem> {
        for (k, v) in [
            ("ttft_ms", slo.ttft_ms),
            ("ttfo_ms", slo.ttfo_ms),
            ("tpot_ms", slo.tpot_ms),
            ("e2e_ms", slo.e2e_ms),
        ] {
            if let Some(v) = v
                && !(v.0.is_finite() && v.0 > 0.0)
            {
                return problem(
                    &format!("{prefix}.{k}"),
                    format!("= {}: must be > 0 milliseconds", v.0),
                );
            }
        }
        if !self.workload.stream {
            for (k, v) in [
                ("ttft_ms", slo.ttft_ms),
                ("ttfo_ms", slo.ttfo_ms),
                ("tpot_ms", slo.tpot_ms),
            ] {
                if v.is_some() {
                    return problem(
                        &format!("{prefix}.{k}"),
                        "needs workload.stream = true: a response that is not streamed has no first token or token gaps to time (use e2e_ms)",
                    );
                }
            }
        }
        if slo.percentile == 100.0 {
            return problem(
                &format!("{prefix}.percentile"),
                "= 100: the maximum can never be supported, since no sample of any size bounds a latency above its largest value; judge p99.9 or lower",
            );
        }
        if !(slo.percentile > 0.0 && slo.percentile < 100.0) {
            return problem(
                &format!("{prefix}.percentile"),
                format!("= {}: must be in (0, 100)", slo.percentile),
            );
        }
        if slo.attainment == 1.0 {
            return problem(
                &format!("{prefix}.attainment"),
                "= 1: every request meeting can never be supported, since no sample of any size shows a miss rate of exactly zero; use 0.999 or lower",
            );
        }
        if !(slo.attainment > 0.0 && slo.attainment < 1.0) {
            return problem(
                &format!("{prefix}.attainment"),
                format!("= {}: must be a fraction in (0, 1)", slo.attainment),
            );
        }
        Ok(())
    }

    fn slo_prediction_repeat(&mut self) -> Result<(), Problem> {
        self.check_slo("slo", &self.slo)?;
        if !self.classes.is_empty() {
            if self.workload.sessions.is_some() {
                return problem(
                    "class",
                    "[[class]] and [workload.sessions] cannot be combined yet: a class is a share of single requests",
                );
            }
            let mut classes = std::mem::take(&mut self.classes);
            let done = classes::resolve(&mut classes, &self.slo, check_dist, |k, s| {
                self.check_slo(k, s)
            });
            self.classes = classes;
            done?;
            for (k, c) in self.classes.iter().enumerate() {
                self.check_extras(&classes::key(k, "request"), &c.request)?;
            }
        }
        if let Some(p) = &self.prediction {
            for e in &p.expect {
                prediction::parse(e).map_err(|m| ("prediction.expect".to_owned(), m))?;
            }
        }
        if self.repeat.runs == 0 {
            return problem("repeat.runs", "must be >= 1");
        }
        if !(self.repeat.pause.0.is_finite() && self.repeat.pause.0 >= 0.0) {
            return problem("repeat.pause", "must be >= 0");
        }
        Ok(())
    }

    /// `[measurement]` and `[quality]`, and the client's token count by target.
    fn measurement_and_quality(&mut self) -> Result<(), Problem> {
        self.stop_when_known()?;
        guard(&self.measurement.guard, self.target.timeout.seconds())?;
        self.guarded_against_floods()?;
        let m = &mut self.measurement;
        if !(m.max_dispatch_lag_ms.0.is_finite() && m.max_dispatch_lag_ms.0 > 0.0) {
            return problem("measurement.max_dispatch_lag_ms", "must be > 0");
        }
        if let Some(t) = &m.traces {
            traces(t)?;
        }
        let q = &self.quality;
        for (key, v) in [
            ("quality.min_identical", q.min_identical),
            ("quality.min_token_agreement", Some(q.min_token_agreement)),
            ("quality.min_relative_score", Some(q.min_relative_score)),
        ] {
            if let Some(v) = v
                && !(v > 0.0 && v <= 1.0)
            {
                return problem(key, format!("= {v}: must be a fraction in (0, 1]"));
            }
        }
        if q.probes > 10_000 {
            return problem(
                "quality.probes",
                format!(
                    "= {}: at most 10000 (they are sent one at a time)",
                    q.probes
                ),
            );
        }
        match (q.mode, &q.references) {
            (QualityMode::Reference, None) => {
                return problem(
                    "quality.references",
                    "mode = \"reference\" needs a references file (JSONL of {\"prompt\", \"answer\"})",
                );
            }
            (QualityMode::None | QualityMode::Consistency, Some(_)) => {
                return problem("quality.references", "is only read in mode = \"reference\"");
            }
            _ => {}
        }
        let scrape = m.server_metrics_interval.0;
        if !(scrape.is_finite() && (scrape == 0.0 || scrape >= 0.05)) {
            return problem(
                "measurement.server_metrics_interval",
                "must be 0 (off) or at least 50ms",
            );
        }
        if !(m.rate_tolerance > 0.0 && m.rate_tolerance < 1.0) {
            return problem("measurement.rate_tolerance", "must be in (0, 1)");
        }
        if !(m.length_tolerance > 0.0 && m.length_tolerance.is_finite()) {
            return problem("measurement.length_tolerance", "must be > 0");
        }
        if !(m.confidence > 0.5 && m.confidence < 1.0) {
            return problem(
                "measurement.confidence",
                format!(
                    "= {}: must be in (0.5, 1), the one-sided confidence a claim is supported at (0.9, 0.95, 0.99); at 0.5 or below a supported claim is weaker than the point estimate",
                    m.confidence
                ),
            );
        }
        if m.client_token_count.is_none() {
            m.client_token_count = Some(if self.target.url.is_none() {
                ClientTokenCount::Words
            } else {
                ClientTokenCount::Chunks
            });
        }
        Ok(())
    }
}

/// `[measurement.guard]`: a bound the guard can use, below the request timeout.
fn guard(g: &super::Guard, timeout_s: f64) -> Result<(), Problem> {
    let Some(w) = g.max_wait else {
        return Ok(());
    };
    let key = "measurement.guard.max_wait";
    let s = w.seconds();
    if !g.enabled {
        return problem(
            key,
            "is set, but the guard is off (measurement.guard.enabled = false): remove one",
        );
    }
    if !(s.is_finite() && s >= MIN_GUARD_WAIT_S) {
        return problem(
            key,
            format!(
                "= {s} s: must be at least {MIN_GUARD_WAIT_S} s (the guard looks four times a second, and a loaded server's TTFT wanders by more than that)"
            ),
        );
    }
    if s > timeout_s {
        return problem(
            key,
            format!(
                "= {s} s: more than target.timeout ({timeout_s} s): every request would time out before it had waited that long; lower it, or raise target.timeout"
            ),
        );
    }
    Ok(())
}

/// The shortest `measurement.guard.max_wait` accepted, seconds.
const MIN_GUARD_WAIT_S: f64 = 1.0;

impl Contract {
    /// An open loop sends on whatever the server does: with the guard and the decided stop
    /// both off, only `load.max_in_flight` bounds what a server that cannot keep up is left
    /// holding, so one of the three must be set.
    fn guarded_against_floods(&self) -> Result<(), Problem> {
        let m = &self.measurement;
        if m.guard.enabled || m.stop_when_decided || !self.load.is_open() {
            return Ok(());
        }
        if self
            .load
            .max_in_flight
            .is_some_and(|n| n < super::DEFAULT_IN_FLIGHT)
        {
            return Ok(());
        }
        problem(
            "measurement.guard.enabled",
            format!(
                "= false with measurement.stop_when_decided = false leaves nothing to stop this open loop when the server cannot keep up: it would send every arrival of its plan whatever the server does, and leave it holding them. Keep either on, or bound what is in flight with load.max_in_flight below {} (arrivals over it are counted as client-dropped)",
                super::DEFAULT_IN_FLIGHT
            ),
        )
    }

    /// `target.urls` and `target.spread`: base URLs like `target.url`, each once; `url`, when
    /// written, is the first of them (the resolved contract writes it so).
    fn replicas(&mut self) -> Result<(), Problem> {
        let t = &mut self.target;
        if t.urls.is_empty() {
            if t.spread.is_some() {
                return problem("target.spread", "applies to target.urls only");
            }
            return Ok(());
        }
        for u in &t.urls {
            crate::secrets::register_url(u);
        }
        if self.cold_start.is_some() && t.urls.len() > 1 {
            return problem(
                "target.urls",
                "lists several replicas, but [cold_start] launches one server: measure its cold start with target.url",
            );
        }
        for (i, u) in t.urls.iter().enumerate() {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return problem(
                    "target.urls",
                    format!(
                        "`{}` must start with http:// or https://",
                        crate::secrets::url_without_password(u)
                    ),
                );
            }
            base_url(u).map_err(|(_, m)| ("target.urls".to_owned(), m))?;
            if t.urls[..i].contains(u) {
                return problem(
                    "target.urls",
                    format!(
                        "lists `{}` twice: each replica once",
                        crate::secrets::url_without_password(u)
                    ),
                );
            }
        }
        match &t.url {
            Some(u) if *u != t.urls[0] => {
                return problem(
                    "target.url",
                    "and target.urls are both set: list every replica in target.urls (the first is probed) and leave target.url out",
                );
            }
            _ => t.url = Some(t.urls[0].clone()),
        }
        t.spread.get_or_insert_default();
        Ok(())
    }
}

/// `target.url` is a server's base URL: it parses (a port in range, a closed IPv6 bracket),
/// and carries no query, fragment or API path, which goodput appends itself. (`{port}`, filled
/// in at run time, stands for a port.)
fn base_url(url: &str) -> Result<(), Problem> {
    let parsed = reqwest::Url::parse(&url.replace("{port}", "1")).map_err(|e| {
        (
            "target.url".to_owned(),
            format!(
                "`{}` is not a URL: {e}",
                crate::secrets::url_without_password(url)
            ),
        )
    })?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return problem(
            "target.url",
            "carries a query or fragment (`?…`, `#…`): give the server's base URL, e.g. http://127.0.0.1:8000",
        );
    }
    let path = parsed.path().trim_end_matches('/');
    if path.ends_with("/v1") || path.contains("/v1/") {
        return problem(
            "target.url",
            format!(
                "ends in an API path (`{path}`): give the server's base URL without /v1 (goodput appends /v1/chat/completions, /v1/models …)"
            ),
        );
    }
    Ok(())
}

/// `workload.sessions.think_ms`: a distribution of milliseconds, at most an hour.
fn think_time(d: &LengthDist) -> Result<(), Problem> {
    let most = match d {
        LengthDist::Fixed { value } => *value,
        LengthDist::Uniform { min, max } if min <= max => *max,
        LengthDist::Normal { min, max, mean, .. }
        | LengthDist::Lognormal { min, max, mean, .. }
            if min <= max =>
        {
            if !(mean.is_finite() && *mean >= 0.0) {
                return problem(
                    "workload.sessions.think_ms.mean",
                    format!("is {mean}: a think time's mean must be >= 0 ms"),
                );
            }
            *max
        }
        _ => {
            return problem(
                "workload.sessions.think_ms",
                "must be fixed, uniform, normal or lognormal milliseconds (min <= max)",
            );
        }
    };
    if f64::from(most) > MAX_THINK_S * 1e3 {
        return problem(
            "workload.sessions.think_ms",
            format!(
                "allows {most} ms between turns; at most {} ms (an hour): a longer pause is another session, and a run that waits it out may never end",
                MAX_THINK_S * 1e3
            ),
        );
    }
    Ok(())
}

/// `name`: it names the bundle's directory, so letters, digits, '-', '_' and '.', and short
/// enough for a file system.
fn check_name(name: &str) -> Result<(), Problem> {
    if name.trim().is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return problem(
            "name",
            "must be non-empty and use only letters, digits, '-', '_' and '.' (it names a directory)",
        );
    }
    if name.len() > MAX_NAME_LEN {
        return problem(
            "name",
            format!(
                "is {} characters; at most {MAX_NAME_LEN} (it names the bundle's directory, and file systems refuse names past 255 bytes)",
                name.len()
            ),
        );
    }
    Ok(())
}

/// `target.url`: http or https, the TLS settings for https only and not at odds, and a base
/// URL the client can use.
fn check_url(url: &str, t: &Tls) -> Result<(), Problem> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return problem(
            "target.url",
            format!("`{url}` must start with http:// or https://"),
        );
    }
    if !url.starts_with("https://") && !t.is_default() {
        return problem(
            if t.insecure {
                "target.tls.insecure"
            } else {
                "target.tls.ca_file"
            },
            "applies to an https:// target.url only",
        );
    }
    if t.insecure && t.ca_file.is_some() {
        return problem(
            "target.tls.insecure",
            "with ca_file makes the CA pointless: keep ca_file (verified) and drop insecure",
        );
    }
    base_url(url)?;
    Ok(())
}

/// A length distribution's key against where lengths can come from: a trace's rows (under
/// trace arrivals only, and then only they), a dataset's entries or a file of lengths.
fn length_source(
    key: &str,
    d: &LengthDist,
    trace: bool,
    dataset: bool,
    has_dataset: bool,
) -> Result<(), Problem> {
    check_dist(key, d)?;
    match d {
        LengthDist::Trace if !trace => {
            return problem(key, "dist = \"trace\" needs load.arrival = \"trace\"");
        }
        LengthDist::Dataset if !dataset => {
            return problem(key, "dist = \"dataset\" needs prompt_source = \"dataset\"");
        }
        LengthDist::Empirical { file: None, .. } if !has_dataset => {
            return problem(
                key,
                "dist = \"empirical\" needs a `file` of lengths, or workload.dataset to take them from",
            );
        }
        LengthDist::Trace | LengthDist::Dataset => {}
        _ if trace => {
            return problem(
                key,
                "under arrival = \"trace\" each request's lengths are its trace row's (or its dataset entry's): set dist = \"trace\" or leave it out",
            );
        }
        _ => {}
    }
    Ok(())
}

fn check_dist(key: &str, d: &LengthDist) -> Result<(), Problem> {
    match d {
        LengthDist::Fixed { value } if *value == 0 => {
            problem(&format!("{key}.value"), "must be >= 1 token")
        }
        LengthDist::Uniform { min, max }
        | LengthDist::Normal { min, max, .. }
        | LengthDist::Lognormal { min, max, .. }
            if *min == 0 || min > max =>
        {
            problem(
                &format!("{key}.min"),
                format!("= {min}: must be >= 1 and <= max ({max})"),
            )
        }
        LengthDist::Normal { mean, stddev, .. } | LengthDist::Lognormal { mean, stddev, .. }
            if !(mean.is_finite() && *mean > 0.0 && stddev.is_finite() && *stddev >= 0.0) =>
        {
            problem(&format!("{key}.mean"), "mean must be > 0 and stddev >= 0")
        }
        LengthDist::Fixed { value: longest }
        | LengthDist::Uniform { max: longest, .. }
        | LengthDist::Normal { max: longest, .. }
        | LengthDist::Lognormal { max: longest, .. }
            if *longest > MAX_TOKENS =>
        {
            let field = if matches!(d, LengthDist::Fixed { .. }) {
                "value"
            } else {
                "max"
            };
            problem(
                &format!("{key}.{field}"),
                format!(
                    "= {longest}: more than {MAX_TOKENS} tokens (longer than any model's context)"
                ),
            )
        }
        _ => Ok(()),
    }
}

/// A load program (`[[load.stage]]`): open loop, the stages in place of the load's rate and
/// bound, expanded and checked.
fn program(l: &mut Load) -> Result<(), Problem> {
    if l.kind == Some(LoadModel::Closed) {
        return problem(
            "load.kind",
            "a load program ([[load.stage]]) runs open-loop stages: leave load.kind out or set it to \"open\"",
        );
    }
    for (k, set) in [
        ("rate", l.rate.is_some()),
        ("requests", l.requests.is_some()),
        ("duration", l.duration.is_some()),
        ("burstiness", l.burstiness.is_some()),
        ("concurrency", l.concurrency.is_some()),
        ("think_time", l.think_time.is_some()),
        ("trace", l.trace.is_some()),
        ("speedup", l.speedup.is_some()),
    ] {
        if set {
            return problem(
                &format!("load.{k}"),
                "the stages ([[load.stage]]) set the load's rate and length: set it in each stage, not here",
            );
        }
    }
    if l.arrival == Some(Arrival::Trace) {
        return problem(
            "load.arrival",
            "a load program draws its arrivals at its stages' rates; a trace sets its own timing",
        );
    }
    l.stage = stages::resolve(&l.stage, l.arrival)?;
    if *l.max_in_flight.get_or_insert(DEFAULT_IN_FLIGHT) == 0 {
        return problem("load.max_in_flight", "must be >= 1");
    }
    Ok(())
}

impl Contract {
    /// `[measurement.stop]`: a rule set, on an SLO with thresholds, in a run whose budget can
    /// meet it (a percentile has no confidence bound at all below a sample size).
    fn stop_when_known(&self) -> Result<(), Problem> {
        let Some(st) = &self.measurement.stop else {
            return Ok(());
        };
        if st.precision.is_none() && !st.conclusive {
            return problem(
                "measurement.stop",
                "set `precision` (e.g. 0.1) or `conclusive = true`: without either it never stops early",
            );
        }
        if self.slo.thresholds().is_empty() {
            return problem(
                "measurement.stop",
                "needs [slo] thresholds: the percentiles it waits for are the SLO's",
            );
        }
        if !self.load.stage.is_empty() || self.workload.sessions.is_some() {
            return problem(
                "measurement.stop",
                "applies to one load of single requests (not a load program, not sessions)",
            );
        }
        if let Some(x) = st.precision {
            if !(x.is_finite() && x > 0.0 && x < 1.0) {
                return problem(
                    "measurement.stop.precision",
                    format!("= {x}: a fraction of the percentile's value in (0, 1), e.g. 0.1"),
                );
            }
            let (p, conf) = (self.slo.percentile, self.measurement.confidence);
            let least = crate::stats::min_requests_for(p, 0, conf);
            if let Some(n) = self.load.requests()
                && n < least
            {
                return problem(
                    "measurement.stop.precision",
                    format!(
                        "can never be met: a p{p} has no upper confidence bound at {:.0}% below {least} requests, and load.requests = {n} is the budget",
                        conf * 100.0
                    ),
                );
            }
        }
        Ok(())
    }
}

/// An open loop: its own keys only, the in-flight cap.
fn open_load(l: &mut Load) -> Result<(), Problem> {
    for (k, set) in [
        ("concurrency", l.concurrency.is_some()),
        ("think_time", l.think_time.is_some()),
    ] {
        if set {
            return problem(
                &format!("load.{k}"),
                "applies to load.kind = \"closed\" only",
            );
        }
    }
    if l.arrival == Some(Arrival::Trace) {
        trace_arrivals(l)?;
    } else {
        rate_arrivals(l)?;
    }
    if *l.max_in_flight.get_or_insert(DEFAULT_IN_FLIGHT) == 0 {
        return problem("load.max_in_flight", "must be >= 1");
    }
    Ok(())
}

/// Trace replay: the trace's timestamps set the rate.
fn trace_arrivals(l: &mut Load) -> Result<(), Problem> {
    for (k, set) in [
        ("rate", l.rate.is_some()),
        ("burstiness", l.burstiness.is_some()),
    ] {
        if set {
            return problem(
                &format!("load.{k}"),
                "does not apply to arrival = \"trace\" (the trace's timestamps set the rate; use `speedup` to scale it)",
            );
        }
    }
    if l.trace.is_none() {
        return problem(
            "load.trace",
            "missing: arrival = \"trace\" needs a trace file (CSV or JSONL of timestamp, input tokens, output tokens)",
        );
    }
    let x = *l.speedup.get_or_insert(1.0);
    if !(x.is_finite() && x > 0.0) {
        return problem("load.speedup", format!("= {x}: must be > 0"));
    }
    if l.trace_block_tokens.is_some_and(|b| b == 0 || b > 1 << 20) {
        return problem("load.trace_block_tokens", "must be 1 to 1048576 tokens");
    }
    Ok(())
}

/// Arrivals at a rate: its bounds, the burstiness, Poisson by default.
fn rate_arrivals(l: &mut Load) -> Result<(), Problem> {
    for (k, set) in [
        ("trace", l.trace.is_some()),
        ("speedup", l.speedup.is_some()),
        ("trace_block_tokens", l.trace_block_tokens.is_some()),
    ] {
        if set {
            return problem(&format!("load.{k}"), "applies to arrival = \"trace\" only");
        }
    }
    let Some(rate) = l.rate else {
        return problem(
            "load.rate",
            "missing: an open-loop load needs a rate in requests per second",
        );
    };
    if !(rate.is_finite() && rate > 0.0) {
        return problem(
            "load.rate",
            format!("= {rate}: must be > 0 requests per second"),
        );
    }
    // Arrivals are scheduled to the microsecond: faster, they would all share
    // the same instants (and no client sends a million requests a second).
    if rate > 1e6 {
        return problem(
            "load.rate",
            format!("= {rate}: must be at most 1000000 requests per second"),
        );
    }
    let b = *l.burstiness.get_or_insert(1.0);
    if !(b.is_finite() && b > 0.0) {
        return problem("load.burstiness", "must be > 0 (1 = Poisson)");
    }
    if b != 1.0 {
        match l.arrival {
            // As in vLLM's `--burstiness`: a burstiness other than 1 means gamma arrivals.
            None => l.arrival = Some(Arrival::Gamma),
            Some(Arrival::Poisson | Arrival::Constant) => {
                return problem(
                    "load.burstiness",
                    "applies to arrival = \"gamma\" only (Poisson has burstiness 1 by definition, constant has none); set arrival = \"gamma\" or leave arrival out",
                );
            }
            _ => {}
        }
    }
    l.arrival.get_or_insert(Arrival::Poisson);
    if l.pin_total == Some(true) {
        if !matches!(l.arrival, Some(Arrival::Poisson | Arrival::Gamma)) {
            return problem(
                "load.pin_total",
                "applies to Poisson or gamma arrivals (it scales their drawn gaps)",
            );
        }
        if l.requests.is_none() || l.duration.is_some() || !l.stage.is_empty() {
            return problem(
                "load.pin_total",
                "needs load.requests, and no load.duration or [[load.stage]]: it scales the gaps of a known number of requests at one rate",
            );
        }
    }
    Ok(())
}

/// `prefix_cache`: the shared prefix's keys apply to `shared` and `warm` only, and leave room
/// for every request's own tokens.
fn prefix_cache(w: &mut Workload, input: &LengthDist) -> Result<(), Problem> {
    match w.prefix_cache {
        PrefixCache::Cold => {
            for (k, set) in [
                ("shared_prefix_tokens", w.shared_prefix_tokens.is_some()),
                ("prefixes", w.prefixes.is_some()),
            ] {
                if set {
                    return problem(
                        &format!("workload.{k}"),
                        "applies to prefix_cache = \"shared\" or \"warm\" only",
                    );
                }
            }
        }
        PrefixCache::Shared | PrefixCache::Warm => {
            let Some(n) = w.shared_prefix_tokens.filter(|&n| n >= 1) else {
                return problem(
                    "workload.shared_prefix_tokens",
                    "a shared or warm prefix cache needs shared_prefix_tokens >= 1",
                );
            };
            if *w.prefixes.get_or_insert(1) == 0 {
                return problem("workload.prefixes", "must be >= 1");
            }
            let shortest = match input {
                LengthDist::Fixed { value } => Some(*value),
                LengthDist::Uniform { min, .. }
                | LengthDist::Normal { min, .. }
                | LengthDist::Lognormal { min, .. } => Some(*min),
                _ => None,
            };
            if let Some(m) = shortest
                && m <= n
            {
                return problem(
                    "workload.shared_prefix_tokens",
                    format!(
                        "= {n} leaves no room for a request's own tokens: input_tokens can be as short as {m}"
                    ),
                );
            }
        }
    }
    Ok(())
}

/// `[measurement.traces]`: an address to listen on, an endpoint and protocol to send to, and
/// bounds that are numbers.
fn traces(t: &crate::contract::Traces) -> Result<(), Problem> {
    if let Some(l) = &t.listen
        && l.parse::<std::net::SocketAddr>().is_err()
    {
        return problem(
            "measurement.traces.listen",
            format!(
                "= \"{l}\": not an address to listen on (host:port with an IP, e.g. \"127.0.0.1:4317\")"
            ),
        );
    }
    if !(t.wait.0.is_finite() && t.wait.0 >= 0.0) {
        return problem("measurement.traces.wait", "must be >= 0");
    }
    if !(t.tolerance_ms.0.is_finite() && t.tolerance_ms.0 >= 0.0) {
        return problem("measurement.traces.tolerance_ms", "must be >= 0");
    }
    if t.max_spans == Some(0) {
        return problem("measurement.traces.max_spans", "must be at least 1");
    }
    if let Err(e) = t.export_protocol.parse::<crate::otlp::export::Protocol>() {
        return problem("measurement.traces.export_protocol", e);
    }
    if let Some(u) = &t.export
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return problem(
            "measurement.traces.export",
            format!(
                "= \"{u}\": an OTLP endpoint URL (http://host:4318/v1/traces, or http://host:4317 with export_protocol = \"grpc\")"
            ),
        );
    }
    Ok(())
}
