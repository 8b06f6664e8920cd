//! [`DistributedDataParallel`]: PyTorch's DDP for a forgia [`Module`]. Parameters are
//! broadcast from rank 0 when it is built; during every backward pass each parameter's
//! post-accumulate-grad hook marks its gradient final, and a bucket (parameters in reverse
//! order, up to `bucket_cap_bytes`) is handed to the communication thread for an allreduce
//! as soon as all of its gradients are final and every earlier bucket has gone — so the
//! communication overlaps the rest of the pass, and every rank starts the same allreduces in
//! the same order. [`DistributedDataParallel::finish`] sends what is left (parameters this
//! pass did not reach: their accumulated gradient, or zeros), waits, and writes back the
//! average.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use forgia::nn::Module;
use forgia::{no_grad, ErrorKind, HookHandle, Tensor};

use crate::comm::{Comm, Op, Pending, Reply};
use crate::error::{DistError, Result};

/// Gradient bucket size when not told otherwise (PyTorch's `bucket_cap_mb=25`).
pub const DEFAULT_BUCKET_CAP_BYTES: usize = 25 * 1024 * 1024;

/// First-bucket size when not told otherwise (PyTorch's `first_bucket_bytes_cap`, 1 MiB).
pub const DEFAULT_FIRST_BUCKET_CAP_BYTES: usize = 1024 * 1024;

/// Options of [`DistributedDataParallel`].
#[derive(Clone, Copy, Debug)]
pub struct DdpOptions {
    /// The most gradient bytes (f32) per allreduce bucket; a parameter larger than this gets
    /// a bucket of its own. Smaller buckets start communicating earlier in the pass, larger
    /// ones make fewer calls.
    pub bucket_cap_bytes: usize,
    /// The most bytes of the first bucket (the last parameters, whose gradients are final
    /// first), when smaller than `bucket_cap_bytes`: a small first bucket starts the first
    /// allreduce early in the pass even for a model smaller than one bucket (PyTorch's
    /// `first_bucket_bytes_cap`, 1 MiB by default).
    pub first_bucket_cap_bytes: usize,
}

impl DdpOptions {
    /// Buckets of at most `bytes` each, the first one included.
    pub fn with_bucket_cap(bytes: usize) -> DdpOptions {
        DdpOptions { bucket_cap_bytes: bytes, first_bucket_cap_bytes: bytes }
    }
}

impl Default for DdpOptions {
    fn default() -> DdpOptions {
        DdpOptions {
            bucket_cap_bytes: DEFAULT_BUCKET_CAP_BYTES,
            first_bucket_cap_bytes: DEFAULT_FIRST_BUCKET_CAP_BYTES,
        }
    }
}

/// One bucket handed to the communication thread.
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    /// The bucket (0 holds the last parameters).
    pub bucket: usize,
    /// The collective's sequence number in [`Comm::started`].
    pub collective: u64,
    /// When it was handed over.
    pub at: Instant,
    /// True when a backward hook launched it (during the pass), false when `finish` did.
    pub from_hook: bool,
}

/// The parameter layout shared by the hooks and the trainer.
struct Plan {
    /// Parameter indices per bucket.
    buckets: Vec<Vec<usize>>,
    /// Each parameter's bucket.
    bucket_of: Vec<usize>,
    /// Each parameter's shape.
    shapes: Vec<Vec<usize>>,
}

/// The state of the current step.
struct Step {
    /// Final gradients handed over by the hooks.
    grads: Vec<Option<Tensor>>,
    /// Parameters not yet final, per bucket.
    remaining: Vec<usize>,
    /// The next bucket to launch.
    next: usize,
    /// Launched buckets waiting for their result.
    inflight: Vec<(usize, Pending)>,
    /// Every launch of this step.
    launches: Vec<Launch>,
}

struct Shared {
    comm: Arc<Comm>,
    plan: Plan,
    /// False inside `no_sync`: hooks do nothing, gradients only accumulate.
    sync: AtomicBool,
    step: Mutex<Step>,
}

impl Shared {
    fn step(&self) -> MutexGuard<'_, Step> {
        self.step.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fresh_step(plan: &Plan) -> Step {
        Step {
            grads: vec![None; plan.shapes.len()],
            remaining: plan.buckets.iter().map(Vec::len).collect(),
            next: 0,
            inflight: Vec::new(),
            launches: Vec::new(),
        }
    }

    /// Launches bucket `b`: its gradients back to back (zeros where a parameter has none),
    /// then one presence flag per parameter (1 when this rank has a gradient), so that a
    /// parameter no rank has a gradient for keeps none.
    fn launch(
        &self,
        step: &mut Step,
        b: usize,
        fallback: &dyn Fn(usize) -> Option<Tensor>,
        from_hook: bool,
    ) -> Result<()> {
        let params = &self.plan.buckets[b];
        let numel: usize = params.iter().map(|&i| self.plan.shapes[i].iter().product::<usize>()).sum();
        let mut data = Vec::with_capacity(numel + params.len());
        let mut flags = Vec::with_capacity(params.len());
        for &i in params {
            let n: usize = self.plan.shapes[i].iter().product();
            match step.grads[i].take().or_else(|| fallback(i)) {
                Some(g) => {
                    // Straight into the send buffer: no copy of its own per gradient.
                    g.with_data(|d| data.extend_from_slice(d));
                    flags.push(1.0);
                }
                None => {
                    data.resize(data.len() + n, 0.0);
                    flags.push(0.0);
                }
            }
        }
        data.extend(flags);
        let (collective, pending) = self.comm.start("gradient allreduce", Op::SumF32(data))?;
        step.inflight.push((b, pending));
        step.launches.push(Launch { bucket: b, collective, at: Instant::now(), from_hook });
        Ok(())
    }

    /// The hook of parameter `i`: its gradient is final for this pass.
    fn on_final(&self, i: usize, g: &Tensor) -> Result<()> {
        if !self.sync.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut step = self.step();
        let b = self.plan.bucket_of[i];
        if step.grads[i].is_some() || step.next > b {
            return Err(DistError::InvalidArgument(
                "a parameter's gradient became final twice in one step: call finish() after every \
                 backward pass that synchronizes, and run the others under no_sync()"
                    .into(),
            ));
        }
        step.grads[i] = Some(g.clone());
        step.remaining[b] -= 1;
        while step.next < self.plan.buckets.len() && step.remaining[step.next] == 0 {
            let next = step.next;
            self.launch(&mut step, next, &|_| None, true)?;
            step.next += 1;
        }
        Ok(())
    }
}

/// Data-parallel training of a model over a [`Comm`] group, in the style of PyTorch's
/// `DistributedDataParallel`: build it once (rank 0's parameters are broadcast to every
/// rank), then each step runs forward and backward on this rank's shard of the global batch,
/// calls [`DistributedDataParallel::finish`], and steps the optimizer. Each rank's loss must
/// be the mean over its own shard; `finish` averages the gradients over ranks, so with equal
/// shards the result is the gradient of the global batch's mean loss.
///
/// ```
/// use std::sync::Arc;
/// use forgia::nn::{Linear, Module};
/// use forgia::{Rng, Tensor};
/// use forgia_distributed::{Comm, DdpOptions, DistributedDataParallel};
///
/// let mut model = Linear::new(3, 2, true, &mut Rng::new(0))?;
/// let comm = Arc::new(Comm::local()); // under mpirun: Comm::mpi(timeout)
/// let ddp = DistributedDataParallel::new(comm, &mut model, DdpOptions::default())?;
/// let x = Tensor::ones(&[4, 3])?;
/// model.forward(&x)?.sum_all().backward()?;
/// ddp.finish()?; // gradients now averaged over the ranks
/// assert_eq!(model.named_parameters()[0].1.grad().unwrap().shape(), &[2, 3]);
/// # Ok::<(), forgia_distributed::DistError>(())
/// ```
pub struct DistributedDataParallel {
    params: Vec<Tensor>,
    shared: Arc<Shared>,
    hooks: Vec<HookHandle>,
    last: Mutex<Vec<Launch>>,
}

impl DistributedDataParallel {
    /// Broadcasts `model`'s parameters from rank 0, checks that every rank has the same
    /// parameter shapes, plans the buckets and registers one hook per parameter.
    ///
    /// # Errors
    /// `Mismatch` when the ranks' parameter shapes differ; `InvalidArgument` for a zero
    /// bucket size or a parameter that is not a variable; a collective's `Timeout`.
    pub fn new(comm: Arc<Comm>, model: &mut dyn Module, options: DdpOptions) -> Result<DistributedDataParallel> {
        if options.bucket_cap_bytes == 0 || options.first_bucket_cap_bytes == 0 {
            return Err(DistError::InvalidArgument(format!(
                "bucket_cap_bytes and first_bucket_cap_bytes must be at least 1 (got {} and {})",
                options.bucket_cap_bytes, options.first_bucket_cap_bytes
            )));
        }
        let params: Vec<Tensor> = model.named_parameters().into_iter().map(|(_, t)| t).collect();
        if let Some(p) = params.iter().find(|p| !p.is_variable()) {
            return Err(DistError::InvalidArgument(format!("a parameter of shape {:?} is not a variable", p.shape())));
        }
        check_same_shapes(&comm, &params)?;
        broadcast_params(&comm, model)?;
        let plan =
            plan(&params, options.first_bucket_cap_bytes.min(options.bucket_cap_bytes), options.bucket_cap_bytes);
        let step = Mutex::new(Shared::fresh_step(&plan));
        let shared = Arc::new(Shared { comm, plan, sync: AtomicBool::new(true), step });
        let mut hooks = Vec::with_capacity(params.len());
        for (i, p) in params.iter().enumerate() {
            let s = Arc::clone(&shared);
            let hook = p.register_post_accumulate_grad_hook(move |g| {
                s.on_final(i, g).map_err(|e| {
                    forgia::Error::from(ErrorKind::InvalidArgument {
                        op: "DistributedDataParallel",
                        arg: "gradient hook",
                        reason: e.to_string(),
                    })
                })
            })?;
            hooks.push(hook);
        }
        Ok(DistributedDataParallel { params, shared, hooks, last: Mutex::new(Vec::new()) })
    }

    /// The process group.
    pub fn comm(&self) -> &Comm {
        &self.shared.comm
    }

    /// The buckets as parameter indices (in the model's `named_parameters` order); bucket 0
    /// holds the last parameters and is the first to be reduced.
    pub fn buckets(&self) -> &[Vec<usize>] {
        &self.shared.plan.buckets
    }

    /// Skips gradient synchronization while the guard lives: backward passes only
    /// accumulate local gradients (micro-batches of gradient accumulation). The first pass
    /// after it, followed by [`DistributedDataParallel::finish`], averages the accumulated sum.
    pub fn no_sync(&self) -> NoSync<'_> {
        // Release: hooks on pool threads of later passes see the flag (the pass start also
        // orders it).
        self.shared.sync.store(false, Ordering::Release);
        NoSync { ddp: self }
    }

    /// Ends a synchronizing step, after its backward pass and before the optimizer step:
    /// launches the buckets the hooks did not (parameters this pass did not reach contribute
    /// their accumulated gradient, or zeros), waits for every bucket and replaces each
    /// parameter's gradient with the average over the ranks. A parameter without a gradient
    /// on every rank keeps none. Every rank must call it the same number of times, also a
    /// rank whose shard is empty (it then contributes zeros). Does nothing inside `no_sync`.
    ///
    /// Issue no other collective between a synchronizing backward pass and `finish`: the
    /// hooks have started this step's allreduces on some ranks and not yet on others, so
    /// another collective in between would be matched against a bucket (as in PyTorch).
    ///
    /// # Errors
    /// A collective's `Timeout` (another rank died or hangs) or `Disconnected`; the job is
    /// then in an unknown state, and the caller should end it ([`Comm::abort`]).
    pub fn finish(&self) -> Result<()> {
        if !self.shared.sync.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut step = self.shared.step();
        while step.next < self.shared.plan.buckets.len() {
            let next = step.next;
            self.shared.launch(&mut step, next, &|i| self.params[i].grad(), false)?;
            step.next += 1;
        }
        let inflight = std::mem::take(&mut step.inflight);
        let launches = std::mem::take(&mut step.launches);
        *step = Shared::fresh_step(&self.shared.plan);
        drop(step);
        let ranks = self.shared.comm.size() as f32;
        for (b, pending) in inflight {
            let Reply::F32(mut values) = pending.wait()? else { unreachable!("a gradient sum replies in f32") };
            let members = &self.shared.plan.buckets[b];
            let flags = values.split_off(values.len() - members.len());
            // The averaged bucket is the storage of its parameters' gradients, each one a view
            // of it (PyTorch's `gradient_as_bucket_view`): no copy and no fresh buffer per
            // parameter after the allreduce.
            values.iter_mut().for_each(|v| *v /= ranks);
            let len = values.len();
            let _guard = no_grad();
            let bucket = Tensor::from_vec(values, &[len])?;
            let mut offset = 0;
            for (&i, &flag) in members.iter().zip(&flags) {
                let shape = &self.shared.plan.shapes[i];
                let n: usize = shape.iter().product();
                let avg = if flag > 0.0 { Some(bucket.narrow(0, offset, n)?.reshape(shape)?) } else { None };
                self.params[i].assign_grad(avg.as_ref())?;
                offset += n;
            }
        }
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = launches;
        Ok(())
    }

    /// The buckets launched in the last finished step, in launch order.
    pub fn last_launches(&self) -> Vec<Launch> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for DistributedDataParallel {
    /// Takes the hooks off the parameters.
    fn drop(&mut self) {
        for h in self.hooks.drain(..) {
            h.remove();
        }
    }
}

/// The guard of [`DistributedDataParallel::no_sync`]: synchronization resumes when it drops.
pub struct NoSync<'a> {
    ddp: &'a DistributedDataParallel,
}

impl Drop for NoSync<'_> {
    fn drop(&mut self) {
        // Release: see `no_sync`.
        self.ddp.shared.sync.store(true, Ordering::Release);
    }
}

/// Buckets over the parameters in reverse order (the order their gradients tend to become
/// final), the first up to `first` bytes and the others up to `cap`; a larger parameter gets
/// its own.
fn plan(params: &[Tensor], first: usize, cap: usize) -> Plan {
    let shapes: Vec<Vec<usize>> = params.iter().map(|p| p.shape().to_vec()).collect();
    let mut buckets: Vec<Vec<usize>> = Vec::new();
    let mut bytes = 0usize;
    for i in (0..params.len()).rev() {
        let b = 4 * params[i].numel();
        let limit = if buckets.len() == 1 { first } else { cap };
        match buckets.last_mut() {
            Some(last) if bytes + b <= limit => {
                last.push(i);
                bytes += b;
            }
            _ => {
                buckets.push(vec![i]);
                bytes = b;
            }
        }
    }
    let mut bucket_of = vec![0; params.len()];
    for (b, members) in buckets.iter().enumerate() {
        for &i in members {
            bucket_of[i] = b;
        }
    }
    Plan { buckets, bucket_of, shapes }
}

/// Fails with `Mismatch` unless every rank has rank 0's parameter shapes.
fn check_same_shapes(comm: &Comm, params: &[Tensor]) -> Result<()> {
    // Rank 0's count, then its shapes (rank, dims) back to back, broadcast as f32 (exact for
    // sizes below 2^24, far above any axis here); a size that is not gets compared by hash.
    let mut describe: Vec<f32> = vec![params.len() as f32];
    for p in params {
        describe.push(p.shape().len() as f32);
        describe.extend(p.shape().iter().map(|&d| d as f32));
    }
    let mut len = [describe.len() as f32];
    comm.broadcast(&mut len, 0)?;
    let mut root = vec![0.0; len[0] as usize];
    if comm.is_root() {
        root.copy_from_slice(&describe);
    }
    comm.broadcast(&mut root, 0)?;
    let mut differs = [if root == describe { 0.0 } else { 1.0 }];
    comm.all_reduce_sum(&mut differs)?;
    if differs[0] > 0.0 {
        return Err(DistError::Mismatch(format!(
            "{} rank(s) have parameter shapes other than rank 0's (this rank: {} parameters)",
            differs[0],
            params.len()
        )));
    }
    Ok(())
}

/// Overwrites every parameter with rank 0's values.
fn broadcast_params(comm: &Comm, model: &mut dyn Module) -> Result<()> {
    if comm.size() == 1 {
        return Ok(());
    }
    let mut flat = Vec::new();
    model.visit_params(&mut |_, p| flat.extend(p.to_vec()));
    comm.broadcast(&mut flat, 0)?;
    let _guard = no_grad();
    let mut offset = 0;
    let mut result = Ok(());
    model.visit_params_mut(&mut |_, p| {
        let n = p.numel();
        if let Err(e) = p.with_data_mut(|d| d.copy_from_slice(&flat[offset..offset + n])) {
            result = Err(e);
        }
        offset += n;
    });
    Ok(result?)
}
