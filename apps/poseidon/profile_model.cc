#include "profile_model.h"

#include "models/model_spec.h"
#include "poseidon/errors.h"
#include "profile/compute_profile.h"
#include "simulate/profiled_model.h"

namespace poseidon::app {

namespace {

// The model a profile describes: its own shape lines, or (older profiles, which carry
// times only) the layers of --model / --model-file.
ModelInfo profiledLayers(const std::string& path, const std::string& model, const std::string& model_file,
                         const ComputeProfile& profile) {
  if (!profile.shapes.empty()) {
    if (!model.empty() || !model_file.empty()) {
      throw InputError("--profile " + path + " describes its model's layers: drop --model and --model-file");
    }
    ModelInfo info;
    info.name = path;
    info.layers = profile.shapes;
    return info;
  }
  if (model.empty() && model_file.empty()) {
    throw InputError("--profile " + path +
                     " has times only (no shape lines): name the model that made it with "
                     "--model or --model-file");
  }
  const ModelSpec spec = model_file.empty() ? builtinModel(model) : parseModelFile(model_file);
  return modelInfoFromSpec(spec);
}

}  // namespace

sim::SimModel profiledModel(const std::string& path, const std::string& model, const std::string& model_file) {
  const ComputeProfile profile = readProfile(path);
  return sim::timedModel(path, profile, profiledLayers(path, model, model_file, profile));
}

}  // namespace poseidon::app
