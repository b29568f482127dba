// poseidon._C: the Python package's view of the C++ core. Thin: the runtime (MPI), the
// options, and AutogradSync (src/torch/autograd_sync.h) over layers that Python found in
// its own module tree. Everything that may block releases the GIL; nothing here calls
// back into Python, so autograd's hooks run without it.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/state_file.h"
#include "comm/transport.h"
#include "coordinator/cost_model.h"
#include "coordinator/scheme_planner.h"
#include "coordinator/units.h"
#include "poseidon/errors.h"
#include "option_bindings.h"
#include "poseidon/option_table.h"
#include "poseidon/options.h"
#include "poseidon/runtime.h"
#include "poseidon/timeline.h"
#include "profile/compute_profile.h"
#include "simulate/profiled_model.h"
#include "torch/autograd_sync.h"
#include "torch/forward_timer.h"
#include "torch/random_state.h"

namespace py = pybind11;

namespace poseidon::python {
namespace {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// One layer as Python describes it.
struct PyLayer {
  std::string name;
  std::string kind;  // "fc", "conv", "other"
  NamedTensors params;
  std::int64_t M = 0, N = 0;
  bool factorable = false;
  std::int64_t rows_per_example = 1;
  std::int64_t rows_touched = 0;  // an embedding's lookup: the distinct rows one batch touched
};

LayerKind kindFrom(const std::string& kind) {
  if (kind == "fc") return LayerKind::kFC;
  if (kind == "conv") return LayerKind::kConv;
  if (kind == "other") return LayerKind::kOther;
  throw InputError("layer kind '" + kind + "': use fc, conv or other");
}

std::vector<NamedTensor> named(const NamedTensors& tensors) {
  std::vector<NamedTensor> out;
  for (const auto& [name, t] : tensors) out.push_back(NamedTensor{name, t});
  return out;
}

ModelTensors modelTensors(const std::string& name, const std::vector<PyLayer>& layers, const NamedTensors& buffers,
                          const NamedTensors& frozen, const std::vector<torch::Tensor>& all) {
  ModelTensors m;
  m.info.name = name;
  for (const auto& l : layers) {
    LayerInfo info;
    info.name = l.name;
    info.kind = kindFrom(l.kind);
    std::vector<torch::Tensor> params;
    for (const auto& [pname, t] : l.params) {
      if (t.scalar_type() != torch::kFloat || !t.is_contiguous()) {
        throw InputError(detail::cat("parameter '", l.name, ".", pname, "' is ", t.scalar_type(),
                                     ": Poseidon trains contiguous float32 parameters (keep the model in float32 "
                                     "and use torch.autocast with GradScaler for lower precision)"));
      }
      info.tensors.push_back(TensorInfo{pname, t.sizes().vec()});
      params.push_back(t);
    }
    info.M = l.M;
    info.N = l.N;
    info.factorable = l.factorable;
    info.rows_per_example = l.rows_per_example;
    info.rows_touched = l.rows_touched;
    m.info.layers.push_back(std::move(info));
    m.params.push_back(std::move(params));
  }
  m.buffers = named(buffers);
  m.frozen = named(frozen);
  m.all = all;
  return m;
}

// The model core with its runtime kept alive as long as it lives.
class PyModel {
 public:
  PyModel(std::shared_ptr<Runtime> runtime, const std::string& name, const std::vector<PyLayer>& layers,
          const NamedTensors& buffers, const NamedTensors& frozen, const std::vector<torch::Tensor>& all,
          const std::vector<int>& self_waited, const Options& options)
      : runtime_(std::move(runtime)),
        transport_(runtime_->newTransport()),
        sync_(std::make_unique<AutogradSync>(modelTensors(name, layers, buffers, frozen, all), options)) {
    for (int l : self_waited) sync_->setSelfWaited(l);
    py::gil_scoped_release release;
    sync_->start(*transport_);
  }

  AutogradSync& sync() {
    if (!sync_) throw Error("this model has been closed");
    return *sync_;
  }
  // `abandon`: this rank is failing (an exception is on its way up): no waiting for peers.
  void close(bool abandon) {
    if (!sync_) return;
    py::gil_scoped_release release;
    if (abandon) {
      sync_->abandon("its training loop raised an exception");
      sync_.reset();
      transport_->stop();
      return;
    }
    sync_->finish();
    sync_.reset();
    transport_->stop();
    if (!transport_->drained()) {
      throw CommError(
          "messages to other ranks were still undelivered 10 s after close() (a peer stalled or its "
          "link went down); end the job");
    }
  }
  // Collective: this job's state (session records, buffers) and this rank's `extra` bytes.
  void saveCheckpoint(const std::string& dir, std::uint64_t iteration, const std::string& config,
                      RandomState& random, const std::string& extra) {
    Session& s = sync().session();
    auto records = sync().stateRecords();
    random.addRecords(records);
    Checkpointer(dir, s.control(), s.layout().rank, s.layout().size).save(iteration, config, records, extra);
  }
  // Collective: restores what saveCheckpoint wrote; returns this rank's extra bytes.
  // `random`: the random state read (and applied) when the model was made, restored again.
  std::string loadCheckpoint(const std::string& dir, const CheckpointInfo& info, const std::string& config,
                             RandomState& random) {
    Session& s = sync().session();
    Checkpointer::checkCompatible(info, config, s.layout().size);
    auto records = sync().stateRecords();
    random.addRecords(records);
    auto extra = Checkpointer(dir, s.control(), s.layout().rank, s.layout().size).load(info, records);
    sync().stateRestored();
    return extra;
  }

  // With a timeline: the spans a compute profile is made of (write_profile), by the adapter's ForwardTimer.
  void beginForward(bool training, bool no_sync) {
    Timeline* tl = training ? sync().session().timeline() : nullptr;
    const auto start = timer_.now(tl);
    sync().beginForward(training, false, no_sync);  // waits for layers and makes the buffers equal
    timer_.begin(tl, training, start);
  }
  void endForward(bool aborted) {
    timer_.end();
    if (aborted) {
      sync().abortForward();
    } else {
      sync().endForward();
    }
  }
  void step() {
    TimelineSpan span(sync().session().timeline(), "compute", "wait step", "wait");
    sync().step();  // gradient mode: waits for every mean gradient
  }
  void waitLayer(int layer) {
    const auto start = ForwardTimer::Clock::now();
    sync().waitLayer(layer);
    timer_.waited(sync().info().layers.at(layer).name, start);
  }
  void markForward(int layer) {
    if (timer_.timing()) timer_.forwardDone(sync().info().layers.at(layer).name);
  }
  // Rank 0 writes the profile of what this rank's timeline holds (the others return).
  void writeProfile(const std::string& path, std::int64_t batch) {
    Session& s = sync().session();
    if (!s.timeline()) throw InputError("write_profile needs the timeline: DistributedModel(..., timeline=True)");
    if (batch <= 0) throw InputError("write_profile: the batch must be positive");
    if (s.layout().rank != 0) return;
    writeFileAtomically(path, profileText(sync().info(), s.timeline()->durationsMs(), batch, s.layout().size));
  }

  // Every rank's timeline so far, gathered (a collective: every rank calls it); rank 0
  // writes the Chrome trace, as `poseidon train --timeline` does.
  void writeTimeline(const std::string& path, const std::string& model) {
    Session& s = sync().session();
    if (!s.timeline()) throw InputError("write_timeline needs the timeline: DistributedModel(..., timeline=True)");
    const auto all = s.control().allgather(s.timeline()->events(), "timeline");
    if (s.layout().rank == 0) writeFileAtomically(path, chromeTrace(all, model));
  }

  py::list plan() {
    py::list out;
    const auto& plans = sync().session().plan();
    const SessionStats stats = sync().session().stats();
    for (std::size_t l = 0; l < plans.size(); ++l) {
      py::dict d;
      d["layer"] = sync().info().layers[l].name;
      d["scheme"] = schemeName(plans[l].scheme);
      d["reason"] = plans[l].reason;
      d["bytes_sent"] = stats.bytes_sent_by_layer[l];
      out.append(std::move(d));
    }
    return out;
  }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::unique_ptr<Transport> transport_;  // this session's own (Runtime::newTransport)
  std::unique_ptr<AutogradSync> sync_;
  ForwardTimer timer_;
};

void checkRoot(const Runtime& runtime, int root) {
  if (root < 0 || root >= runtime.size()) {
    throw InputError(detail::cat("root_rank ", root, " is not a rank of this job of ", runtime.size()));
  }
}

// Collectives outside any model (broadcast_parameters, broadcast_optimizer_state, a
// checkpoint's agreement): on a transport of their own, made for one exchange (a `with`).
class PyCollectives {
 public:
  PyCollectives(std::shared_ptr<Runtime> runtime, double timeout_s) : runtime_(std::move(runtime)) {
    py::gil_scoped_release release;
    channel_ = runtime_->newCollectives(std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000)));
  }
  void broadcastTensor(torch::Tensor t, int root) {
    checkRoot(*runtime_, root);
    if (!t.is_contiguous() || !t.device().is_cpu()) throw InputError("broadcast: a contiguous CPU tensor only");
    py::gil_scoped_release release;
    open().broadcastBytes(t.data_ptr(), t.nbytes(), root, "a tensor of broadcast_parameters");
  }
  bool allAgree(bool mine) {
    py::gil_scoped_release release;
    const auto sum = open().allreduceSum({mine ? 1.0 : 0.0}, "an agreement of every rank");
    return sum[0] == static_cast<double>(runtime_->size());
  }
  py::bytes broadcastBytes(const py::bytes& mine, int root) {
    checkRoot(*runtime_, root);
    std::string data = mine;
    {
      py::gil_scoped_release release;
      data = open().broadcast(data, root, "a broadcast of Python state");
    }
    return py::bytes(data);
  }
  std::vector<py::bytes> allgatherBytes(const py::bytes& mine) {
    std::string data = mine;
    std::vector<std::string> all;
    {
      py::gil_scoped_release release;
      all = open().allgather(data, "an allgather of Python tensors");
    }
    return {all.begin(), all.end()};
  }
  void barrier() {
    py::gil_scoped_release release;
    open().barrier("poseidon.barrier()");
  }
  void close() {
    py::gil_scoped_release release;
    channel_.reset();
  }

 private:
  Collectives& open() {
    if (!channel_) throw Error("these collectives have been closed");
    return *channel_;
  }
  std::shared_ptr<Runtime> runtime_;
  std::unique_ptr<Collectives> channel_;
};

void bindCollectives(py::module_& m) {
  // "200mbit", "1gbit", "125MB" or bytes/s: the CLI's reader, so both take the same words.
  // A rate keyword's bytes per second ("1gbit", "500MB"; "0": none), OptionError naming it.
  m.def("parse_rate_or_off", &parseRateOrOff, py::arg("text"), py::arg("field"));
  py::class_<PyCollectives>(m, "Collectives")
      .def(py::init<std::shared_ptr<Runtime>, double>(), py::arg("runtime"), py::arg("timeout_s") = 600.0)
      .def("broadcast_tensor_", &PyCollectives::broadcastTensor)
      .def("all_agree", &PyCollectives::allAgree)
      .def("broadcast_bytes", &PyCollectives::broadcastBytes)
      .def("allgather_bytes", &PyCollectives::allgatherBytes)
      .def("barrier", &PyCollectives::barrier)
      .def("close", &PyCollectives::close)
      .def(
          "__enter__", [](PyCollectives& c) -> PyCollectives& { return c; }, py::return_value_policy::reference)
      .def("__exit__", [](PyCollectives& c, py::args) { c.close(); });
}

void bindCheckpoints(py::module_& m) {
  py::class_<CheckpointInfo>(m, "CheckpointInfo")
      .def_readonly("folder", &CheckpointInfo::folder)
      .def_readonly("iteration", &CheckpointInfo::iteration)
      .def_readonly("ranks", &CheckpointInfo::ranks)
      .def_readonly("config", &CheckpointInfo::config);
  // The newest complete checkpoint in `dir` that a job of `ranks` ranks may resume.
  m.def("latest_checkpoint", [](const std::string& dir, int ranks) {
    CheckpointInfo info = Checkpointer::latest(dir);
    Checkpointer::checkRanks(info, ranks);
    return info;
  });
  // InputError unless a job with `config` on `ranks` ranks may resume from `info`.
  m.def("check_checkpoint", [](const CheckpointInfo& info, const std::string& config, int ranks) {
    Checkpointer::checkCompatible(info, config, ranks);
  });
  // The random generators' state in the core's records (src/torch/random_state.h).
  py::class_<RandomState>(m, "RandomState")
      .def_static("take", &RandomState::take, py::arg("gpus"))
      .def_static("read", &RandomState::read, py::arg("info"), py::arg("rank"))
      .def("empty", &RandomState::empty)
      .def("apply", &RandomState::apply);
  // This rank's extra bytes in `info` (local: no other rank takes part).
  m.def("checkpoint_extra",
        [](const CheckpointInfo& info, int rank) { return py::bytes(Checkpointer::readExtra(info, rank)); });
}

PyObject* input_error_type = nullptr;  // poseidon._C.InputError (a ValueError)

void translateOptionError(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const OptionError& e) {
    PyErr_SetString(input_error_type, e.in(sayInPython).c_str());
  }
}

PyObject* culprit_timeout_type = nullptr;  // poseidon._C.CulpritTimeout (a poseidon._C.TimeoutError)

// With `names_worker` set on the exception: runtime.py waits before ending the job (or
// leaving it) when it is false, as the CLI does.
void translateCulpritTimeout(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const CulpritTimeout& e) {
    py::object error = py::reinterpret_borrow<py::object>(culprit_timeout_type)(e.what());
    error.attr("names_worker") = e.namesWorker();
    PyErr_SetObject(culprit_timeout_type, error.ptr());
  }
}

void bindModel(py::module_& m) {
  py::class_<PyLayer>(m, "Layer")
      .def(py::init<>())
      .def_readwrite("name", &PyLayer::name)
      .def_readwrite("kind", &PyLayer::kind)
      .def_readwrite("params", &PyLayer::params)
      .def_readwrite("M", &PyLayer::M)
      .def_readwrite("N", &PyLayer::N)
      .def_readwrite("factorable", &PyLayer::factorable)
      .def_readwrite("rows_per_example", &PyLayer::rows_per_example)
      .def_readwrite("rows_touched", &PyLayer::rows_touched);
  const auto unlocked = py::call_guard<py::gil_scoped_release>();
  py::class_<PyModel>(m, "Model")
      .def(py::init<std::shared_ptr<Runtime>, const std::string&, const std::vector<PyLayer>&, const NamedTensors&,
                    const NamedTensors&, const std::vector<torch::Tensor>&, const std::vector<int>&, const Options&>())
      .def("begin_forward", &PyModel::beginForward, unlocked)
      .def("end_forward", [](PyModel& p) { p.endForward(false); })
      .def("abort_forward", [](PyModel& p) { p.endForward(true); })
      .def("wait_layer", &PyModel::waitLayer, unlocked)
      .def("mark_forward", &PyModel::markForward)
      .def("write_profile", &PyModel::writeProfile, unlocked)
      .def("write_timeline", &PyModel::writeTimeline, unlocked)
      .def("factors_wanted", [](PyModel& p, int l) { return p.sync().factorsWanted(l); })
      .def("capture_factors",
           [](PyModel& p, int l, const torch::Tensor& x, torch::Tensor y) { return p.sync().captureFactors(l, x, y); })
      .def("step", &PyModel::step, unlocked)
      .def(
          "synchronize", [](PyModel& p) { p.sync().synchronize(); }, unlocked)
      .def(
          "digest", [](PyModel& p) { return p.sync().digest(); }, unlocked)
      .def("set_step_values", [](PyModel& p, float lr, float momentum,
                                 float weight_decay) { p.sync().session().setStepValues(lr, momentum, weight_decay); })
      .def(
          "seed_momentum",
          [](PyModel& p, const std::vector<std::vector<torch::Tensor>>& momentum) { p.sync().seedMomentum(momentum); },
          unlocked)
      .def(
          "gather_momentum", [](PyModel& p) { return p.sync().gatherMomentum(); }, unlocked)
      // True on every rank if every rank passed True: over the session's own control channel
      // (no communicator is made beside a running session, as a Collectives would).
      .def(
          "all_agree",
          [](PyModel& p, bool mine) {
            const auto all = p.sync().session().control().allgather(mine ? "1" : "0", "an agreement of every rank");
            return std::all_of(all.begin(), all.end(), [](const std::string& s) { return s == "1"; });
          },
          unlocked)
      .def("uses_factors", [](PyModel& p, int l) { return usesFactors(p.sync().session().plan().at(l).scheme); })
      .def("iteration", [](PyModel& p) { return p.sync().session().iteration(); })
      .def("bytes_sent", [](PyModel& p) { return p.sync().session().stats().bytes_sent; })
      .def("rank", [](PyModel& p) { return p.sync().session().layout().rank; })
      .def("workers", [](PyModel& p) { return p.sync().session().layout().workers; })
      .def("plan", &PyModel::plan)
      // What a job resumed from this one's checkpoints must share with it; `front_end`: the
      // package's own settings (Session::resumeConfiguration).
      .def("resume_configuration",
           [](PyModel& p, const std::string& front_end) { return p.sync().session().resumeConfiguration(front_end); })
      .def("save_checkpoint",
           [](PyModel& p, const std::string& dir, std::uint64_t iteration, const std::string& config,
              RandomState& random, const py::bytes& extra) {
             std::string bytes = extra;
             py::gil_scoped_release release;
             p.saveCheckpoint(dir, iteration, config, random, bytes);
           })
      .def("load_checkpoint",
           [](PyModel& p, const std::string& dir, const CheckpointInfo& info, const std::string& config,
              RandomState& random) {
             std::string extra;
             {
               py::gil_scoped_release release;
               extra = p.loadCheckpoint(dir, info, config, random);
             }
             return py::bytes(extra);
           })
      .def("close", &PyModel::close, py::arg("abandon") = false);
}

}  // namespace
}  // namespace poseidon::python

PYBIND11_MODULE(_C, m) {
  using namespace poseidon;
  m.doc() = "Poseidon's C++ core for the Python package (see poseidon/__init__.py)";
  // Poseidon's errors reach Python as the exceptions a Python user expects.
  // pybind11 tries the most recently registered first: the base class goes first.
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  const py::handle timeout = py::register_exception<TimeoutError>(m, "TimeoutError", PyExc_TimeoutError);
  python::input_error_type = py::register_exception<InputError>(m, "InputError", PyExc_ValueError).ptr();
  // The type alone (translateCulpritTimeout raises it); names_worker true by default, so an
  // instance made without it never makes the uncaught-exception hook wait.
  const py::object culprit = py::exception<CulpritTimeout>(m, "CulpritTimeout", timeout);
  culprit.attr("names_worker") = true;
  python::culprit_timeout_type = culprit.ptr();  // the module keeps it
  m.attr("INDIRECT_WITNESS_GRACE_S") = std::chrono::duration<double>(CulpritTimeout::kIndirectWitnessGrace).count();
  // Last, so tried first: an option error says the option as a keyword; a culprit timeout
  // carries whether it names a worker.
  py::register_exception_translator(python::translateCulpritTimeout);
  py::register_exception_translator(python::translateOptionError);
  py::class_<Runtime, std::shared_ptr<Runtime>>(m, "Runtime")
      .def(py::init([] { return std::make_shared<Runtime>(nullptr, nullptr); }))
      .def("rank", &Runtime::rank)
      .def("size", &Runtime::size)
      .def("abort_job", &Runtime::abortJob);
  python::bindOptions(m);
  python::bindModel(m);
  python::bindCollectives(m);
  python::bindCheckpoints(m);
}
