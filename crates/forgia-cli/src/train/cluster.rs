//! The process group of a training run: this one process, or — with `--distributed` under
//! `mpirun` (cargo feature `distributed`) — one rank of a data-parallel job. Each rank trains
//! on its shard of every global batch; gradients are averaged by
//! `forgia_distributed::DistributedDataParallel`; rank 0 alone prints, logs and saves.
//! Without the feature every method is the single-process identity.

use forgia::nn::Module;

use super::{TrainArgs, TrainError};

#[cfg(feature = "distributed")]
mod dist {
    use std::sync::Arc;
    use std::time::Duration;

    use forgia_distributed::{Comm, DdpOptions, DistributedDataParallel, DistributedSampler};

    /// A data-parallel run's group, sampler and (once the model exists) DDP wrapper.
    pub(super) struct Dist {
        pub(super) comm: Arc<Comm>,
        pub(super) sampler: DistributedSampler,
        pub(super) ddp: Option<DistributedDataParallel>,
    }

    /// How long a collective may wait for the other ranks before the job is called hung
    /// (an epoch's evaluation runs between two collectives).
    pub(super) const TIMEOUT: Duration = Duration::from_secs(300);

    pub(super) fn start() -> Result<Dist, super::TrainError> {
        let comm = Arc::new(forgia_distributed::init(TIMEOUT)?);
        let sampler = DistributedSampler::new(comm.rank(), comm.size());
        Ok(Dist { comm, sampler, ddp: None })
    }

    pub(super) fn options() -> DdpOptions {
        DdpOptions::default()
    }
}

/// This run's place in its process group.
pub(super) struct Cluster {
    #[cfg(feature = "distributed")]
    dist: Option<dist::Dist>,
}

impl Cluster {
    /// The group `args` ask for: with `--distributed`, the MPI world (a one-rank group when
    /// not started by `mpirun`); otherwise this process alone.
    ///
    /// # Errors
    /// MPI's start-up errors; `Invalid` when `mpirun` started several ranks without
    /// `--distributed` (they would each train alone and overwrite each other's files).
    pub(super) fn new(args: &TrainArgs) -> Result<Cluster, TrainError> {
        #[cfg(feature = "distributed")]
        {
            if args.distributed {
                return Ok(Cluster { dist: Some(dist::start()?) });
            }
            if std::env::var("OMPI_COMM_WORLD_SIZE").is_ok_and(|n| n != "1") {
                return Err(TrainError::Invalid(
                    "started by mpirun with several ranks: pass --distributed for data-parallel training".into(),
                ));
            }
            Ok(Cluster { dist: None })
        }
        #[cfg(not(feature = "distributed"))]
        {
            let _ = args;
            Ok(Cluster {})
        }
    }

    /// True on the rank that prints, logs and saves (always, outside a distributed run).
    pub(super) fn is_root(&self) -> bool {
        #[cfg(feature = "distributed")]
        if let Some(d) = &self.dist {
            return d.comm.is_root();
        }
        true
    }

    /// `(rank, ranks)` of a distributed run, for the description line.
    pub(super) fn ranks(&self) -> Option<(usize, usize)> {
        #[cfg(feature = "distributed")]
        if let Some(d) = &self.dist {
            return Some((d.comm.rank(), d.comm.size()));
        }
        None
    }

    /// Wraps the model for data-parallel training: rank 0's parameters go to every rank
    /// (after `--resume`, which every rank reads) and gradient hooks are registered.
    ///
    /// # Errors
    /// The ranks' models differ, or a collective fails.
    pub(super) fn attach(&mut self, model: &mut dyn Module) -> Result<(), TrainError> {
        #[cfg(feature = "distributed")]
        if let Some(d) = &mut self.dist {
            d.ddp = Some(forgia_distributed::DistributedDataParallel::new(d.comm.clone(), model, dist::options())?);
        }
        let _ = model;
        Ok(())
    }

    /// This rank's part of a global batch.
    pub(super) fn shard<'a>(&self, batch: &'a [usize]) -> &'a [usize] {
        #[cfg(feature = "distributed")]
        if let Some(d) = &self.dist {
            return d.sampler.shard(batch);
        }
        batch
    }

    /// The factor on this rank's mean loss that makes the averaged gradient the global
    /// batch's (1 with equal shards and outside a distributed run).
    pub(super) fn loss_weight(&self, shard: usize, global: usize) -> f32 {
        #[cfg(feature = "distributed")]
        if let Some(d) = &self.dist {
            return d.sampler.loss_weight(shard, global);
        }
        let _ = (shard, global);
        1.0
    }

    /// After backward: waits for the gradient buckets and writes back the averages.
    ///
    /// # Errors
    /// A collective's timeout (another rank died or hangs).
    pub(super) fn sync_gradients(&self) -> Result<(), TrainError> {
        #[cfg(feature = "distributed")]
        if let Some(ddp) = self.dist.as_ref().and_then(|d| d.ddp.as_ref()) {
            ddp.finish()?;
        }
        Ok(())
    }

    /// Sums per-rank statistics (loss sums, sample and correct counts) over the group.
    ///
    /// # Errors
    /// A collective's timeout.
    pub(super) fn sum(&self, stats: &mut [f64]) -> Result<(), TrainError> {
        #[cfg(feature = "distributed")]
        if let Some(d) = &self.dist {
            d.comm.all_reduce_sum_f64(stats)?;
        }
        let _ = stats;
        Ok(())
    }

    /// Ends a failed run: in a distributed run, prints `error` with this rank and aborts the
    /// job on every rank (never returns); otherwise hands the error back.
    pub(super) fn fail(&self, error: TrainError) -> TrainError {
        #[cfg(feature = "distributed")]
        if let Some(d) = &self.dist {
            if d.comm.size() > 1 {
                d.comm.abort(1, &error.to_string());
            }
        }
        error
    }
}
