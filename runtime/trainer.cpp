// Trainer implementation: step loop state, update bindings, checkpoints.
#include "runtime/trainer.h"

#include "ir/mpc_ops.h"
#include "kernels/lr_schedule_attrs.h"
#include "passes/inference_mode.h"
#include "passes/onnx/onnx_io.h"
#include "passes/optimizer/ema.h"
#include "passes/optimizer/grad_accum.h"
#include "passes/step_graph.h"
#include "passes/weight_copies.h"
#include "runtime/checkpoint_mismatch.h"
#include "runtime/data/safetensors.h"
#include "runtime/state_dict.h"
#include "support/diagnostics.h"

#include "ir/step_metadata.h"
#include "onnx/onnx_pb.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

namespace mpc {

namespace {

constexpr const char *kStepsDoneKey = "mpc.run.steps_done";
constexpr const char *kSeedKey = "mpc.run.seed";
constexpr const char *kShuffleKey = "mpc.run.shuffle";
constexpr const char *kBestEvalKey = "mpc.run.best_eval_loss";
constexpr const char *kEvalsSinceBestKey = "mpc.run.evals_since_best";
// ReduceLROnPlateau's counters.
constexpr const char *kPlateauBestKey = "mpc.run.plateau_best";
constexpr const char *kPlateauBadKey = "mpc.run.plateau_bad_evals";
constexpr const char *kPlateauCooldownKey = "mpc.run.plateau_cooldown";

/// A run's number kept in metadata ("%.17g", "inf" allowed); `dflt` when
/// absent; an Error when it is not a number.
double runNumber(const Model &m, const char *key, double dflt) {
  const std::string *v = m.meta(key);
  if (!v)
    return dflt;
  char *end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || std::isnan(x))
    throw Error(std::string("checkpoint metadata '") + key +
                "' is not a number: '" + *v + "'");
  return x;
}

/// The value the entry names, or "" when the step has none.
std::string metaOr(const Model &m, ValueKey key) {
  const std::string *v = readMeta(m, key);
  return v ? *v : std::string();
}

/// A run counter of a checkpoint's metadata (steps done, seed): a whole
/// non-negative decimal number up to `max`, or `dflt` when absent. The
/// metadata is input like any other, so anything else is an Error.
uint64_t runCounter(const Model &m, const char *key, uint64_t max,
                    uint64_t dflt) {
  const std::string *v = m.meta(key);
  if (!v)
    return dflt;
  uint64_t n = 0;
  bool ok = !v->empty() && v->size() <= 20;
  for (char c : *v) {
    if (!ok || c < '0' || c > '9' || n > (max - uint64_t(c - '0')) / 10) {
      ok = false;
      break;
    }
    n = n * 10 + uint64_t(c - '0');
  }
  if (!ok)
    throw Error(std::string("checkpoint metadata '") + key +
                "' is not a number from 0 to " + std::to_string(max) + ": '" +
                *v + "'");
  return n;
}

/// Steps a run may count: far more than any run takes, small enough that
/// step x batch (the data position) cannot overflow.
constexpr uint64_t kMaxStepsDone = uint64_t(1) << 40;

/// ReduceLROnPlateau's counters of a model or checkpoint (torch's initial
/// ones when absent).
LrPlateauState plateauStateOf(const Model &m) {
  LrPlateauState s;
  s.best = runNumber(m, kPlateauBestKey, s.best);
  s.badEvals = int64_t(runCounter(m, kPlateauBadKey, kMaxStepsDone, 0));
  s.cooldownLeft =
      int64_t(runCounter(m, kPlateauCooldownKey, kMaxStepsDone, 0));
  return s;
}

/// Throws Error when the step updates none of the model's parameters (a
/// model compiled with --passes that left out the optimizer: training it
/// would run and log steps while every parameter stays as it was).
void refuseStepThatTrainsNothing(const Model &m) {
  bool params = hasMeta(m, meta::kParams) || hasMeta(m, meta::kUserParams);
  std::vector<std::string> names = hasMeta(m, meta::kParams)
                                       ? readMeta(m, meta::kParams)
                                       : readMeta(m, meta::kUserParams);
  for (const auto &[state, value] : m.training->updateBinding)
    if (!params || std::find(names.begin(), names.end(), state) != names.end())
      return;
  throw Error("its training step updates no parameter (" +
              std::string(params ? "the optimizer pass did not run: "
                                   "compiled with a --passes list?"
                                 : "no update_binding") +
              "); compile it with mpc-opt MODEL -o OUT and the optimizer's "
              "flags, without --passes");
}

/// Refuses a loss scale that is NaN, infinite or not above 0 (a checkpoint
/// edited or written by a broken run): every step would overflow or
/// divide by it and be skipped, and the dynamic scaler can never bring it
/// back (NaN and inf stay themselves under backoff and growth).
/// `where`: the file, prefixed to the message ("" for the run's model,
/// whose path the tool adds).
void refuseBrokenLossScale(const Graph &g, const std::string &name,
                           const std::string &where) {
  const Value *v = name.empty() ? nullptr : g.findValue(name);
  if (!v || !v->isInitializer() || v->initializer()->numel() < 1)
    return;
  double scale = v->initializer()->getAsDouble(0);
  if (scale > 0 && !std::isinf(scale))
    return;
  char text[32];
  std::snprintf(text, sizeof text, "%g", scale);
  throw Error((where.empty() ? "" : where + ": ") + "its loss scale '" + name +
              "' is " + text +
              "; a loss scale must be a finite number > 0 (with this one "
              "every step would be skipped)");
}

/// Throws Error when a state of the step (a weight, an optimizer moment, a
/// running statistic, the loss scale) holds NaN or infinity: every step
/// from it would be skipped or train NaN. `where` (a checkpoint's path)
/// prefixes the line.
void refuseNonFiniteState(const Graph &g, const std::string &where) {
  for (const Value *v : g.initializers()) {
    if (!v->isState || !v->initializer())
      continue;
    const std::string note = v->initializer()->nonFiniteNote();
    if (note.empty())
      continue;
    throw Error((where.empty() ? "" : where + ": ") + "its state '" +
                v->name() + "' holds " + note +
                ": no step can train from it (a run that diverged saved it, "
                "or the file is corrupt)");
  }
}

/// A master's 16-bit working copy (mpc-opt's weight-copies pass) as the
/// step must see it: the master's value cast to the copy's type (the pairs
/// checked by checkWeightCopies).
Tensor weightCopyOf(const Graph &alg, const std::string &copy,
                    const Tensor &masterValue) {
  return masterValue.castTo(alg.findValue(copy)->dtype);
}

/// Every weight copy of `model`'s step recomputed from its master: derived
/// state, so a master edited in the file is never read through a stale copy.
void refreshWeightCopies(Model &model) {
  checkWeightCopies(model); // also: copies name a training step's state
  for (const auto &[master, copy] : weightCopyPairs(model)) {
    Graph &alg = *model.training->algorithm;
    alg.findValue(copy)->setInitializer(std::make_shared<Tensor>(
        weightCopyOf(alg, copy, *alg.findValue(master)->initializer())));
  }
}

} // namespace

Trainer::Trainer(std::unique_ptr<Model> model, Backend &backend,
                 Collective *world)
    : model_(std::move(model)), world_(world) {
  // --shard-optimizer: this rank's chunks of the optimizer state, cut from
  // whole tensors where the file holds them (a checkpoint run as a model).
  sharded_ = shardedStateOf(*model_);
  checkShardedWorld(sharded_, world_ ? world_->size() : 1);
  if (sharded_.sharded())
    cutWholeState(*model_, sharded_, world_ ? world_->rank() : 0, "");
  refreshWeightCopies(*model_);
  step_ = runnableStep(*model_);
  refuseStepThatTrainsNothing(*model_);
  lossName_ = stepLossName(*model_, *step_);
  foundInfName_ = metaOr(*model_, meta::kFoundInf);
  lossScaleName_ = metaOr(*model_, meta::kLossScale);
  gradNormName_ = metaOr(*model_, meta::kGradNorm);
  refuseBrokenLossScale(*model_->training->algorithm, lossScaleName_, "");
  refuseNonFiniteState(*model_->training->algorithm, "");
  if (const std::string *k = readMeta(*model_, meta::kGradAccum)) {
    char *end = nullptr;
    microBatches_ = std::strtoll(k->c_str(), &end, 10);
    // Bounded as mpc-opt's --grad-accum is: a model edited to ask for
    // 2^63-1 micro-batches must not start an endless window.
    if (k->empty() || *end != '\0' || microBatches_ < 1 ||
        microBatches_ > kMaxGradAccum)
      throw Error("mpc.grad_accum: expected an integer from 1 to " +
                  std::to_string(kMaxGradAccum) +
                  " (mpc-opt --grad-accum), got '" + *k + "'");
    counterName_ = metaOr(*model_, meta::kGradAccumCounter);
  }
  // The rate mpc-run reports: the schedule's, else the updates' attribute.
  for (const auto &n : step_->nodes()) {
    if (n->domain() != kMpcDomain)
      continue;
    if (n->opType() == "LearningRate" && n->input(0)) {
      schedule_ = lrScheduleOf(*n);
      scheduleStepName_ = n->input(0)->name();
    } else if (n->opType() == "SGD" || n->opType() == "Adam") {
      constantLr_ = n->attrFloat("lr", 1e-3f);
    }
  }
  // mpc.lr names any optimizer's rate (older models lack it).
  if (const std::string *rate = readMeta(*model_, meta::kLr))
    constantLr_ = std::strtod(rate->c_str(), nullptr);
  ExecutorOptions options;
  options.collective = world_;
  options.opset = std::max<int64_t>(model_->opsetVersion(""), 1);
  options.updateBinding = model_->training->updateBinding;
  for (auto &[master, copy] : weightCopyPairs(*model_))
    options.weightCopies.push_back(std::move(copy));
  // On a device-resident backend the step's one synchronisation brings back
  // what every step reads: the loss, the overflow flag, the gradient norm,
  // the scale the next step uses and the accumulation counter (state the
  // device rewrote).
  if (backend.deviceResident())
    for (const std::string *name :
         {&lossName_, &foundInfName_, &gradNormName_, &lossScaleName_,
          &counterName_, &scheduleStepName_})
      if (!name->empty())
        options.fetchAfterRun.push_back(*name);
  exec_ = std::make_unique<Executor>(*step_, backend, options);
  const std::string *plateau = readMeta(*model_, meta::kLrPlateau);
  const std::string *rateState = readMeta(*model_, meta::kLrState);
  if (plateau && rateState) {
    plateau_ = parseLrPlateau(*plateau, std::string(meta::kLrPlateau.name));
    plateauLrName_ = *rateState;
    plateauLr_ = exec_->initializer(plateauLrName_).getAsDouble(0);
    plateauState_ = plateauStateOf(*model_);
  }
  stepsDone_ = int64_t(runCounter(*model_, kStepsDoneKey, kMaxStepsDone, 0));
  seed = runCounter(*model_, kSeedKey, UINT64_MAX, 0);
  bestEvalLoss = runNumber(*model_, kBestEvalKey, bestEvalLoss);
  evalsSinceBest =
      int64_t(runCounter(*model_, kEvalsSinceBestKey, kMaxStepsDone, 0));
  if (const std::string *s = model_->meta(kShuffleKey))
    shuffle = *s == "1";
}

std::vector<DataInputSpec> Trainer::dataInputs(int64_t &batch) const {
  return describeDataInputs(*step_, batch);
}

size_t Trainer::checkMemory(int64_t batch, const MemoryLimit &limit) {
  // Every input of the step is a data input, in this order.
  std::vector<std::vector<int64_t>> dims;
  for (const DataInputSpec &s : describeDataInputs(*step_, batch)) {
    dims.push_back({batch});
    dims.back().insert(dims.back().end(), s.sampleDims.begin(),
                       s.sampleDims.end());
  }
  exec_->setMemoryLimit(limit);
  return exec_->checkMemory(dims);
}

StepRecord Trainer::step(Batch batch) {
  requireNoStepInFlight("a single run of the step");
  launchRun(std::move(batch));
  return collectRun();
}

Trainer::PendingRun &Trainer::launchRun(Batch batch) {
  auto start = std::chrono::steady_clock::now();
  const bool resident = exec_->resident();
  // A window starts with the counter at 0; anything else (a model saved
  // mid-window by another tool) would put the boundary elsewhere. Checked
  // where the host knows it (a run in flight rewrites it on the device;
  // after the first window every window ends at 0 by construction).
  if (microDone_ == 0 && !counterName_.empty() && runs_.empty()) {
    int64_t counter = int64_t(exec_->initializer(counterName_).getAsDouble(0));
    if (counter != 0)
      throw Error("state '" + counterName_ + "' is " + std::to_string(counter) +
                  ", not 0: the model was saved inside a --grad-accum window");
  }
  PendingRun run;
  StepRecord &rec = run.rec;
  rec.step = stepsDone_ + 1;
  run.start = start;
  // The scale and rate this run uses are the state the last run left: on
  // the host now, unless a run in flight on the device has yet to bring
  // them (collectRun reads them then).
  run.scaleKnown = !resident || runs_.empty();
  if (run.scaleKnown) {
    if (!lossScaleName_.empty())
      rec.lossScale = exec_->initializer(lossScaleName_).getAsDouble(0);
    rec.lr = lr();
  }
  for (auto &kv : batch)
    exec_->setInput(kv.first, std::move(kv.second));
  // One seed per run of the step (per micro-batch): dropout masks differ
  // between the micro-batches of a window.
  run.seed =
      seed * 1000003u + uint64_t(stepsDone_ * microBatches_ + microDone_);
  exec_->launch(run.seed);
  if (!resident) {
    // The results are here already (and the next run overwrites them).
    rec.loss = exec_->output(lossName_).getAsDouble(0);
    if (!foundInfName_.empty())
      rec.skipped = exec_->output(foundInfName_).getAsDouble(0) != 0;
    if (!gradNormName_.empty())
      rec.gradNorm = exec_->output(gradNormName_).getAsDouble(0);
    // No state has changed yet (updates are applied below), so the re-run
    // sees the same state, batch and seed, and recomputes the same outputs.
    // A device-resident step has applied its updates already (a skipped
    // step still backs the scale off), so it is not re-run: rec.overflow
    // stays empty (mpc-run --debug-overflow runs the cuda backend staged).
    if (rec.skipped && debugOverflow)
      rec.overflow = findFirstOverflow(*exec_, *step_, lossName_, run.seed);
    // Read every new value before writing any: a state may be bound to a
    // value that another binding also reads. An update the plan wrote over
    // its state is already in place.
    const auto &binding = model_->training->updateBinding;
    std::vector<Tensor> updates(binding.size());
    std::vector<bool> inPlace(binding.size());
    for (size_t i = 0; i < binding.size(); ++i) {
      const Tensor &now = exec_->output(binding[i].second);
      inPlace[i] = now.bytes.data() ==
                       exec_->initializer(binding[i].first).bytes.data() &&
                   !now.bytes.empty();
      if (!inPlace[i])
        updates[i] = now;
    }
    for (size_t i = 0; i < binding.size(); ++i)
      if (!inPlace[i])
        exec_->setInitializer(binding[i].first, std::move(updates[i]));
    rec.nextLossScale = lossScale();
  }
  if (++microDone_ == microBatches_) {
    microDone_ = 0;
    ++stepsDone_;
  }
  runs_.push_back(std::move(run));
  return runs_.back();
}

StepRecord Trainer::collectRun() {
  if (runs_.empty())
    throw Error("internal error: no launched step to collect");
  PendingRun run = std::move(runs_.front());
  runs_.pop_front();
  StepRecord &rec = run.rec;
  if (exec_->resident()) {
    // Before this run's values are installed, the fetched state is the one
    // the run before it left: the scale and rate this run used.
    if (!run.scaleKnown) {
      rec.lossScale = lossScale();
      rec.lr = lr();
    }
    exec_->collect();
    rec.loss = exec_->output(lossName_).getAsDouble(0);
    if (!foundInfName_.empty())
      rec.skipped = exec_->output(foundInfName_).getAsDouble(0) != 0;
    if (!gradNormName_.empty())
      rec.gradNorm = exec_->output(gradNormName_).getAsDouble(0);
    rec.nextLossScale = lossScale();
  }
  if (world_ && world_->size() > 1) {
    // The loss each rank logs: the mean over the ranks (the global batch's
    // loss for a mean-reduced loss), summed in rank order like the
    // gradients. Every rank collects its runs in launch order, so the
    // gathers pair up.
    std::vector<double> losses = gatherFromRanks(*world_, rec.loss);
    double sum = 0;
    for (double l : losses)
      sum += l;
    rec.loss = sum / double(losses.size());
  }
  peakBytes_ = std::max(peakBytes_, exec_->peakBytes());
  arenaPeakBytes_ = std::max(arenaPeakBytes_,
                             exec_->arenaBytes() + exec_->fallbackPeakBytes());
  auto now = std::chrono::steady_clock::now();
  // A run launched ahead overlapped the one before: its time starts when
  // that one's results were read.
  rec.ms = std::chrono::duration<double, std::milli>(
               now - std::max(run.start, lastCollect_))
               .count();
  lastCollect_ = now;
  return rec;
}

void Trainer::requireNoStepInFlight(const char *what) const {
  if (!runs_.empty())
    throw Error(std::string("internal error: ") + what + " while " +
                std::to_string(runs_.size()) +
                " run(s) of the step are in flight (the state is not the "
                "host's yet)");
}

StepRecord Trainer::optimizerStep(const std::vector<Batch> &microBatches) {
  if (int64_t(microBatches.size()) != microBatches_)
    throw Error("an optimizer step of this model takes " +
                std::to_string(microBatches_) +
                " micro-batches (--grad-accum), got " +
                std::to_string(microBatches.size()));
  return optimizerStep(
      [&](int64_t j) -> Batch { return microBatches[size_t(j)]; });
}

StepRecord
Trainer::optimizerStep(const std::function<Batch(int64_t)> &microBatch) {
  requireNoStepInFlight("an optimizer step run alone");
  launchStep(microBatch);
  return collectStep();
}

void Trainer::launchStep(const std::function<Batch(int64_t)> &microBatch) {
  if (microDone_ != 0)
    throw Error("optimizerStep inside an accumulation window (after " +
                std::to_string(microDone_) + " of " +
                std::to_string(microBatches_) + " micro-batches)");
  bool diagnose = debugOverflow, found = false;
  // Each micro-batch is made when its turn comes and let go after: K of
  // them at once would hold K batches of data (K = 65536 of a large batch
  // does not fit).
  for (int64_t j = 0; j < microBatches_; ++j) {
    // Diagnose the first micro-batch that overflows: the sums stay
    // non-finite after it, so later ones report found_inf too. (Only a
    // host-state step diagnoses, and its results are known at launch.)
    debugOverflow = diagnose && !found;
    found = launchRun(microBatch(j)).rec.overflow.found || found;
  }
  debugOverflow = diagnose;
}

StepRecord Trainer::collectStep() {
  StepRecord window;
  double lossSum = 0;
  for (int64_t j = 0; j < microBatches_; ++j) {
    StepRecord r = collectRun();
    if (r.overflow.found && !window.overflow.found)
      window.overflow = r.overflow;
    if (j == 0) {
      window.step = r.step;
      window.lossScale = r.lossScale;
      window.lr = r.lr;
    }
    lossSum += r.loss;
    window.skipped = r.skipped;   // the K-th run checks the accumulated sums
    window.gradNorm = r.gradNorm; // and clips them: the earlier ones' are
                                  // norms of partial sums
    window.nextLossScale = r.nextLossScale;
    window.ms += r.ms;
  }
  window.loss = lossSum / double(microBatches_);
  return window;
}

void Trainer::synchronizeRanks(int64_t batch) {
  requireNoStepInFlight("synchronizing the ranks");
  if (!world_ || world_->size() == 1)
    return;
  // FNV-1a over what every rank must agree on.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= static_cast<const uint8_t *>(p)[i];
      h *= 1099511628211ull;
    }
  };
  auto mixInt = [&](int64_t v) { mix(&v, sizeof v); };
  std::vector<std::string> stateNames;
  for (const Value *init : model_->training->algorithm->initializers())
    if (init->isState) {
      stateNames.push_back(init->name());
      const Tensor &t = exec_->initializer(init->name());
      mix(init->name().data(), init->name().size() + 1);
      mixInt(int64_t(t.dtype));
      for (int64_t d : t.dims)
        mixInt(d);
      mixInt(-1);
    }
  for (int64_t v :
       {batch, microBatches_, stepsDone_, int64_t(seed), int64_t(shuffle)})
    mixInt(v);
  std::vector<uint64_t> all = gatherFromRanks(*world_, h);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error("rank " + std::to_string(r) +
                  " runs another step than rank 0 (a different model, "
                  "--batch, checkpoint, --seed or --shuffle): every rank "
                  "must be started with the same ones");
  for (const std::string &name : stateNames) {
    // A sharded master: rank 0's whole weight (the main graph's, the file's
    // or the resumed checkpoint's), of which this rank keeps its chunk.
    auto entry = std::find_if(
        sharded_.entries.begin(), sharded_.entries.end(),
        [&](const ShardedState::Entry &e) { return e.state == name; });
    Value *main = model_->graph->findValue(name);
    if (entry != sharded_.entries.end() && entry->master() && main &&
        main->isInitializer()) {
      Tensor &whole = *main->initializer();
      world_->broadcast(whole.bytes.data(), whole.byteSize(), 0);
      exec_->setInitializer(name,
                            chunkOf(whole, sharded_.worldSize, world_->rank()));
      continue;
    }
    // A sharded moment is this rank's own chunk, not rank 0's.
    if (entry != sharded_.entries.end())
      continue;
    Tensor t = exec_->initializer(name);
    world_->broadcast(t.bytes.data(), t.byteSize(), 0);
    exec_->setInitializer(name, std::move(t));
  }
}

const Tensor &Trainer::state(const std::string &name) const {
  return exec_->initializer(name);
}

Tensor Trainer::wholeState(const std::string &name) const {
  return std::move(wholeStates({name})[0]);
}

std::vector<Tensor>
Trainer::wholeStates(const std::vector<std::string> &names) const {
  std::map<std::string, const ShardedState::Entry *> masters;
  for (const ShardedState::Entry &e : sharded_.entries)
    if (e.master())
      masters[e.state] = &e;
  std::vector<const Tensor *> chunks;
  std::vector<std::vector<int64_t>> dims;
  std::vector<size_t> slots; // where each gathered master goes
  std::vector<Tensor> wholes(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = masters.find(names[i]);
    if (it == masters.end()) {
      wholes[i] = exec_->initializer(names[i]);
      continue;
    }
    chunks.push_back(&exec_->initializer(names[i]));
    dims.push_back(it->second->dims);
    slots.push_back(i);
  }
  if (chunks.empty())
    return wholes;
  std::vector<Tensor> gathered =
      gatherWholeMany(world_, chunks, dims, sharded_.worldSize);
  for (size_t g = 0; g < slots.size(); ++g)
    wholes[slots[g]] = std::move(gathered[g]);
  return wholes;
}

void Trainer::gatherMasters() {
  requireNoStepInFlight("gathering the weights");
  std::vector<std::string> names;
  for (const ShardedState::Entry &e : sharded_.entries)
    if (e.master() && model_->graph->findValue(e.state))
      names.push_back(e.state);
  std::vector<Tensor> wholes = wholeStates(names);
  for (size_t i = 0; i < names.size(); ++i)
    *model_->graph->findValue(names[i])->initializer() = std::move(wholes[i]);
}

double Trainer::lossScale() const {
  return lossScaleName_.empty()
             ? 1.0
             : exec_->initializer(lossScaleName_).getAsDouble(0);
}

double Trainer::lr() const {
  if (plateau_)
    return plateauLr_;
  if (schedule_)
    return scheduledLr(
        *schedule_,
        int64_t(exec_->initializer(scheduleStepName_).getAsDouble(0)));
  return constantLr_;
}

double Trainer::reduceLrOnPlateau(double validationLoss) {
  requireNoStepInFlight("changing the rate");
  if (!plateau_)
    return plateauLr_;
  double lr =
      stepLrPlateau(*plateau_, plateauState_, validationLoss, plateauLr_);
  if (lr != plateauLr_) {
    plateauLr_ = lr;
    exec_->setInitializer(plateauLrName_, Tensor::scalar(DType::F64, lr));
  }
  return lr;
}

void Trainer::writeStateBack() {
  // The algorithm's state initializers share their tensors with the main
  // graph, so writing them updates the inference graph too.
  for (Value *init : model_->training->algorithm->initializers())
    if (init->isState)
      *init->initializer() = exec_->initializer(init->name());
  // A sharded master's chunk is the step's own tensor; the main graph's
  // whole one needs a gather, which one rank alone can do only when it is
  // the only rank (the callers gather on every rank otherwise).
  if (!world_ || world_->size() <= 1)
    gatherMasters();
  model_->setMeta(kStepsDoneKey, std::to_string(stepsDone_));
  model_->setMeta(kSeedKey, std::to_string(seed));
  model_->setMeta(kShuffleKey, shuffle ? "1" : "0");
  if (!std::isnan(bestEvalLoss)) {
    char best[32];
    std::snprintf(best, sizeof best, "%.17g", bestEvalLoss);
    model_->setMeta(kBestEvalKey, best);
    model_->setMeta(kEvalsSinceBestKey, std::to_string(evalsSinceBest));
  }
  if (plateau_) {
    char best[32];
    std::snprintf(best, sizeof best, "%.17g", plateauState_.best);
    model_->setMeta(kPlateauBestKey, best);
    model_->setMeta(kPlateauBadKey, std::to_string(plateauState_.badEvals));
    model_->setMeta(kPlateauCooldownKey,
                    std::to_string(plateauState_.cooldownLeft));
  }
}

void Trainer::saveCheckpoint(const std::string &path) {
  requireNoStepInFlight("a checkpoint");
  if (microDone_ != 0)
    throw Error(path + ": cannot checkpoint inside an accumulation window (" +
                std::to_string(microDone_) + " of " +
                std::to_string(microBatches_) + " micro-batches run)");
  writeStateBack();
  // --shard-optimizer: the file holds every sharded state whole, gathered
  // from the ranks, in place of this rank's chunk for the write.
  std::vector<TensorPtr> chunks;
  std::vector<const Tensor *> parts;
  std::vector<std::vector<int64_t>> dims;
  for (const ShardedState::Entry &e : sharded_.entries) {
    const Graph &alg = *model_->training->algorithm;
    chunks.push_back(alg.findValue(e.state)->initializer());
    parts.push_back(chunks.back().get());
    dims.push_back(e.dims);
  }
  std::vector<Tensor> wholes =
      gatherWholeMany(world_, parts, dims, sharded_.worldSize);
  for (size_t i = 0; i < wholes.size(); ++i)
    setShardedState(*model_, sharded_.entries[i].state,
                    std::make_shared<Tensor>(std::move(wholes[i])));
  // A master's gathered weight stays the main graph's (the current
  // weights); the step keeps its chunk.
  auto restore = [&] {
    for (size_t i = 0; i < chunks.size(); ++i)
      setShardedState(*model_, sharded_.entries[i].state, chunks[i],
                      sharded_.entries[i].master());
  };
  if (path.empty()) { // a rank that only took part in the gather
    restore();
    return;
  }
  // Straight from the IR into the file (no ModelProto, no second copy of
  // the state in memory), fsynced, with external data past 2 GiB.
  ModelWriteOptions options;
  options.externalData = externalData;
  try {
    writeModelFile(*model_, path, options);
  } catch (...) {
    restore();
    throw;
  }
  restore();
}

std::vector<std::string> Trainer::resumeFrom(const std::string &path) {
  requireNoStepInFlight("a resume");
  std::unique_ptr<Model> ckpt = loadModel(path);
  if (!ckpt->training)
    throw Error(path + ": not an mpc checkpoint (no training step)");
  const Graph &mine = *model_->training->algorithm;
  const Graph &theirs = *ckpt->training->algorithm;
  // A sharded state's whole shape (its parameter's), or nullptr.
  auto shardedWhole =
      [&](const std::string &name) -> const std::vector<int64_t> * {
    for (const ShardedState::Entry &e : sharded_.entries)
      if (e.state == name)
        return &e.dims;
    return nullptr;
  };
  // Every check before any change: a refused checkpoint leaves the run as
  // it was.
  uint64_t steps, newSeed;
  double best;
  uint64_t sinceBest;
  LrPlateauState plateauState;
  try {
    steps = runCounter(*ckpt, kStepsDoneKey, kMaxStepsDone, 0);
    newSeed = runCounter(*ckpt, kSeedKey, UINT64_MAX, seed);
    best = runNumber(*ckpt, kBestEvalKey,
                     std::numeric_limits<double>::quiet_NaN());
    sinceBest = runCounter(*ckpt, kEvalsSinceBestKey, kMaxStepsDone, 0);
    plateauState = plateauStateOf(*ckpt);
  } catch (const Error &e) {
    throw Error(path + ": " + e.what());
  }
  // Weight copies are derived from their masters: a checkpoint may lack
  // them (written by a step without copies) or hold ones this model lacks.
  std::map<std::string, std::string> myCopies; // copy -> master
  for (auto &[master, copy] : weightCopyPairs(*model_))
    myCopies[copy] = master;
  std::vector<std::pair<std::string, std::string>> theirCopies;
  try {
    theirCopies = weightCopyPairs(*ckpt);
  } catch (const Error &e) {
    throw Error(path + ": " + e.what());
  }
  auto isTheirCopy = [&](const std::string &name) {
    for (const auto &pair : theirCopies)
      if (pair.second == name)
        return true;
    return false;
  };
  for (const Value *init : mine.initializers()) {
    if (!init->isState || myCopies.count(init->name()))
      continue;
    const Value *other = theirs.findValue(init->name());
    if (!other || !other->isInitializer())
      throw Error(path +
                  ": checkpoint does not match the model: it has no "
                  "state '" +
                  init->name() + "'" +
                  compileSettingsDifference(*ckpt, *model_));
    const Tensor &t = *other->initializer();
    // A sharded state is whole in a checkpoint (the parameter's shape).
    const std::vector<int64_t> *whole = shardedWhole(init->name());
    if (whole && t.dtype == init->initializer()->dtype && t.dims == *whole)
      continue;
    if (t.dtype != init->initializer()->dtype ||
        t.dims != init->initializer()->dims)
      throw Error(path + ": checkpoint does not match the model: state '" +
                  init->name() + "' is " + dtypeName(t.dtype) + "[" +
                  dimsToString(t.dims) + "], the model has " +
                  dtypeName(init->initializer()->dtype) + "[" +
                  dimsToString(init->initializer()->dims) + "]" +
                  compileSettingsDifference(*ckpt, *model_));
  }
  for (const Value *other : theirs.initializers())
    if (other->isState && !mine.findValue(other->name()) &&
        !isTheirCopy(other->name()))
      throw Error(path + ": checkpoint does not match the model: state '" +
                  other->name() + "' is not in the model" +
                  compileSettingsDifference(*ckpt, *model_));
  refuseBrokenLossScale(theirs, lossScaleName_, path);
  refuseNonFiniteState(theirs, path);
  std::vector<std::pair<std::string, Tensor>> copies;
  for (const auto &[copy, master] : myCopies)
    copies.emplace_back(
        copy,
        weightCopyOf(mine, copy, *theirs.findValue(master)->initializer()));
  for (const Value *init : mine.initializers())
    if (init->isState && !myCopies.count(init->name())) {
      const Tensor &t = *theirs.findValue(init->name())->initializer();
      if (shardedWhole(init->name())) {
        exec_->setInitializer(
            init->name(),
            chunkOf(t, sharded_.worldSize, world_ ? world_->rank() : 0));
        // A master's whole weight is the main graph's (evaluation, exports).
        for (const ShardedState::Entry &e : sharded_.entries)
          if (e.master() && e.state == init->name())
            if (Value *w = model_->graph->findValue(e.state))
              *w->initializer() = t;
      } else
        exec_->setInitializer(init->name(), t);
    }
  for (auto &[copy, value] : copies)
    exec_->setInitializer(copy, std::move(value));
  stepsDone_ = int64_t(steps);
  microDone_ = 0; // checkpoints are taken at optimizer-step boundaries
  seed = newSeed;
  bestEvalLoss = best;
  evalsSinceBest = int64_t(sinceBest);
  if (plateau_) {
    plateauState_ = plateauState;
    plateauLr_ = exec_->initializer(plateauLrName_).getAsDouble(0);
  }
  if (const std::string *s = ckpt->meta(kShuffleKey))
    shuffle = *s == "1";
  std::vector<std::string> notes;
  if (std::string lr = learningRateChange(*ckpt, *model_); !lr.empty())
    notes.push_back(path + ": " + lr);
  return notes;
}

std::vector<std::string>
Trainer::exportInference(const std::string &path,
                         const InferenceExportOptions &options) {
  requireNoStepInFlight("an export");
  writeStateBack();
  // The trained state (the main graph's tensors are the step's, updated by
  // writeStateBack), or the parameters' moving average in their place.
  std::map<std::string, TensorPtr> weights;
  if (options.ema) {
    auto pairs = emaPairs(*model_);
    if (pairs.empty())
      throw Error(path + ": the model keeps no moving average of its "
                         "parameters (compile it with mpc-opt --ema-decay=D)");
    for (const auto &[param, average] : pairs)
      weights[param] = std::make_shared<Tensor>(state(average));
  }
  std::vector<std::string> notes;
  std::unique_ptr<Model> inference;
  try {
    inference = buildInferenceModel(*model_, options, weights, notes);
  } catch (const Error &e) {
    throw Error(path + ": " + e.what());
  }
  ModelWriteOptions write;
  write.externalData = externalData;
  writeModelFile(*inference, path, write);
  return notes;
}

void Trainer::checkInferenceExport(
    const std::string &path, const InferenceExportOptions &options) const {
  std::vector<std::string> notes;
  try {
    buildInferenceModel(*model_, options, {}, notes);
  } catch (const Error &e) {
    throw Error(path + ": " + e.what());
  }
}

std::vector<StateDictEntry> Trainer::stateDict(bool ema) {
  requireNoStepInFlight("an export of the state");
  if (microDone_ != 0)
    throw Error("cannot export inside an accumulation window (" +
                std::to_string(microDone_) + " of " +
                std::to_string(microBatches_) + " micro-batches run)");
  writeStateBack();
  return stateDictOf(*model_, stepsDone_ * microBatches_, ema);
}

size_t Trainer::exportSafetensors(const std::string &path, bool ema) {
  std::vector<StateDictEntry> entries;
  try {
    entries = stateDict(ema);
  } catch (const Error &e) {
    throw Error(path + ": " + e.what());
  }
  std::vector<SafetensorsTensor> tensors;
  for (const StateDictEntry &e : entries)
    tensors.push_back({e.name, &e.value});
  // "format": "pt" as torch's and transformers' writers put it.
  SafetensorsMetadata metadata = {
      {"format", "pt"}, {"mpc.steps_done", std::to_string(stepsDone_)}};
  if (ema)
    metadata.emplace_back("mpc.weights", "ema");
  writeSafetensors(path, tensors, metadata);
  return tensors.size();
}

int64_t Trainer::lrScheduleStep() const {
  return schedule_
             ? int64_t(exec_->initializer(scheduleStepName_).getAsDouble(0))
             : 0;
}

} // namespace mpc
