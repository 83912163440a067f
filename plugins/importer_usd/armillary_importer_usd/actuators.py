"""Actuator prims of a USD stage as :meth:`ModelBuilder.add_actuator` entries (the ``armillary-actuators`` plugin).

Two schema families, read by attribute name (neither schema package is required):

* ``NewtonActuator`` (``newton-usd-schemas``): always imported, as the reference engine does.
  ``newton:targets`` names one ``PhysicsRevoluteJoint`` / ``PhysicsPrismaticJoint`` (only the first
  target is used); exactly one control API: ``NewtonPDControlAPI`` (``newton:kp``, ``newton:kd``,
  ``newton:constEffort``) -> ``ControllerPD``, ``NewtonPIDControlAPI`` (also ``newton:ki``,
  ``newton:integralMax``) -> ``ControllerPID``, ``NewtonNeuralControlAPI`` (``newton:modelPath``, an
  ``.onnx`` checkpoint whose metadata ``model_type`` is ``"mlp"`` or ``"lstm"``) ->
  ``ControllerNeuralMLP`` / ``ControllerNeuralLSTM``; optional ``NewtonActuatorDelayAPI``
  (``newton:delaySteps``, default 1) -> ``delay_steps``; clampings ``NewtonMaxEffortClampingAPI``
  (``newton:maxEffort``), ``NewtonDCMotorClampingAPI`` (``newton:saturationEffort``,
  ``newton:velocityLimit``, ``newton:maxMotorEffort``), ``NewtonPositionBasedClampingAPI``
  (``newton:lookupPositions``, ``newton:lookupEfforts``), applied in that order (the schema leaves
  the order open: they are order independent). Unauthored values take the schema's defaults (gains
  0, limits infinite). Values are in joint space and radians; for prismatic joints lengths are
  converted with the stage's ``metersPerUnit`` like drive gains (gains per stage length divided by
  it, velocity limits, table positions and ``integralMax`` multiplied by it; efforts unchanged).
* ``MjcActuator`` (MuJoCo's ``mjcPhysics`` schema), only with ``add_usd(..., actuator_components=True)``
  (an armillary option; the reference engine has none): ``mjc:target`` (a revolute / prismatic
  joint), ``mjc:gainType`` / ``mjc:gainPrm``, ``mjc:biasType`` / ``mjc:biasPrm``, ``mjc:gear``,
  ``mjc:forceLimited`` / ``mjc:forceRange:min|max``, ``mjc:ctrlLimited`` / ``mjc:ctrlRange:min|max``,
  mapped exactly like the MJCF importer's ``actuator_components=True``: fixed gain without bias ->
  ``ControllerPD(kp=0, kd=0)`` passing ``Control.joint_act`` (the joint effort ``gear * gain * ctrl``),
  affine bias ``(b0, -kp, -kv)`` with gain ``kp`` -> ``ControllerPD(kp gear^2, kv gear^2,
  const_effort=gear b0)`` on joint-space targets ``ctrl / gear``, ``(b0, 0, -kv)`` with gain ``kv``
  -> the velocity form; limited force (and, without bias, control) ranges ->
  ``ClampingMaxEffort`` of the largest magnitude times ``|gear|`` (``|gear gain|``). Other forms,
  body / site transmissions and multi-DOF joints are skipped with a :class:`USDImportWarning`.

Bad input raises :class:`USDImportError` (a ``ValueError``) naming the actuator prim: no target
relationship, a target that does not exist or is not a revolute / prismatic joint (``NewtonActuator``),
none or several control APIs, invalid values (negative gains, delays, bad tables), an unsupported
checkpoint. A target joint that exists but was not imported (ignored path, disabled) is skipped with a
warning. When the ``armillary-actuators`` plugin is not installed the actuator prims are skipped with
one warning.
"""

from __future__ import annotations

import json
import math
import os

from .utils import USDImportError, get_attribute, has_applied_api_schema

__all__ = ["import_actuators"]

NEWTON_ACTUATOR = "NewtonActuator"
MJC_ACTUATOR = "MjcActuator"
_CONTROL_APIS = ("NewtonPDControlAPI", "NewtonPIDControlAPI", "NewtonNeuralControlAPI")
_JOINT_TYPES = ("PhysicsRevoluteJoint", "PhysicsPrismaticJoint")
_TORCH_SUFFIXES = (".pt", ".pt2", ".pth")


def _float(prim, name: str, default: float) -> float:
    v = get_attribute(prim, name)
    if v is None:
        return float(default)
    try:
        return float(v)
    except (TypeError, ValueError):
        raise USDImportError(f"expected a number, got {v!r}", prim.GetPath(), name) from None


def _floats(prim, name: str, default) -> list[float]:
    v = get_attribute(prim, name)
    if v is None:
        return [float(x) for x in default]
    try:
        return [float(x) for x in v]
    except (TypeError, ValueError):
        raise USDImportError(f"expected a list of numbers, got {v!r}", prim.GetPath(), name) from None


def _token(prim, name: str, default: str) -> str:
    v = get_attribute(prim, name)
    return default if v is None else str(v)


class _ActuatorImport:
    """One pass over the stage's actuator prims, adding entries to the importer's scratch builder."""

    def __init__(self, imp):
        self.imp = imp
        self.s = imp.s
        self.result = imp.result
        self.lu = float(imp.lu)
        self.count = 0
        self._plugin_ok: bool | None = None

    # -------------------------------------------------------------- helpers
    def _plugin_available(self, path: str) -> bool:
        if self._plugin_ok is None:
            try:
                from armillary.plugins import get_registry

                get_registry().actuators.resolve("ControllerPD")
                self._plugin_ok = True
            except Exception:
                self._plugin_ok = False
                self.imp.warn(path, None, "actuator prims need the armillary-actuators plugin (pip install "
                              "armillary-actuators); the stage's actuators were skipped")  # fmt: skip
        return self._plugin_ok

    def _target(self, prim, rel_name: str):
        """``(target prim, its path)``; ``USDImportError`` when the relationship is missing or dangling."""
        path = str(prim.GetPath())
        rel = prim.GetRelationship(rel_name)
        targets = list(rel.GetTargets()) if rel else []
        if not rel or not rel.HasAuthoredTargets() or not targets:
            raise USDImportError(
                f"actuator has no authored {rel_name!r} relationship target (deactivate the prim to disable it)", path
            )
        if len(targets) > 1:
            self.imp.warn(path, rel_name, f"{len(targets)} targets; only the first ({targets[0]}) is used")
        tpath = str(targets[0])
        tprim = prim.GetStage().GetPrimAtPath(tpath)
        if not tprim or not tprim.IsValid():
            raise USDImportError(f"actuator target {tpath!r} does not exist on the stage", path, rel_name)
        return tprim, tpath

    def _dof(self, prim, tprim, tpath: str):
        """``(dof index, coordinate index, prismatic?)`` of the target joint in the scratch builder, or None."""
        from armillary.sim.enums import JointType

        r, s = self.result, self.s
        path = str(prim.GetPath())
        if tpath in r["path_joint_dof_map"]:  # one axis of a joint merged by newton:jointsAddMobility
            dof, coord = r["path_joint_dof_map"][tpath][0], r["path_joint_coord_map"][tpath][0]
        elif tpath in r["path_joint_map"]:
            j = r["path_joint_map"][tpath]
            if JointType(s.joint_type[j]) not in (JointType.REVOLUTE, JointType.PRISMATIC, JointType.D6):
                self.imp.warn(path, None, f"target joint {tpath!r} was imported as a {JointType(s.joint_type[j]).name} "
                              "joint without a scalar DOF; actuator skipped")  # fmt: skip
                return None
            dof, coord = s.joint_qd_start[j], s.joint_q_start[j]
        else:
            self.imp.warn(path, None, f"target joint {tpath!r} was not imported (ignored or disabled); "
                          "actuator skipped")  # fmt: skip
            return None
        return dof, coord, tprim.GetTypeName() == "PhysicsPrismaticJoint"

    def _add(self, prim, controller: str, index: int, pos_index: int, clamping, delay_steps, args: dict) -> None:
        try:
            self.s.add_actuator(controller, index=index, pos_index=pos_index, clamping=clamping or None,
                                delay_steps=delay_steps, **args)  # fmt: skip
        except ValueError as exc:
            raise USDImportError(str(exc), prim.GetPath()) from None
        self.count += 1

    # -------------------------------------------------------------- NewtonActuator
    def newton_actuator(self, prim) -> None:
        path = str(prim.GetPath())
        tprim, tpath = self._target(prim, "newton:targets")
        if tprim.GetTypeName() not in _JOINT_TYPES:
            raise USDImportError(
                f"actuator target {tpath!r} is a {tprim.GetTypeName() or 'typeless prim'}; only "
                f"{' / '.join(_JOINT_TYPES)} can be actuated", path, "newton:targets"
            )  # fmt: skip
        controls = [api for api in _CONTROL_APIS if has_applied_api_schema(prim, api)]
        if not controls:
            raise USDImportError(f"actuator has no control API (apply one of {', '.join(_CONTROL_APIS)})", path)
        if len(controls) > 1:
            raise USDImportError(f"actuator has several control APIs ({', '.join(controls)}); apply exactly one", path)
        if not self._plugin_available(path):
            return
        where = self._dof(prim, tprim, tpath)
        if where is None:
            return
        dof, coord, linear = where
        L = self.lu if linear else 1.0  # stage length -> m for prismatic joints
        api = controls[0]
        if api == "NewtonNeuralControlAPI":
            controller, args = self._neural(prim)
        else:
            controller = "ControllerPD" if api == "NewtonPDControlAPI" else "ControllerPID"
            args = {"kp": _float(prim, "newton:kp", 0.0) / L, "kd": _float(prim, "newton:kd", 0.0) / L,
                    "const_effort": _float(prim, "newton:constEffort", 0.0)}  # fmt: skip
            if api == "NewtonPIDControlAPI":
                args["ki"] = _float(prim, "newton:ki", 0.0) / L
                args["integral_max"] = _float(prim, "newton:integralMax", math.inf) * L
        delay = None
        if has_applied_api_schema(prim, "NewtonActuatorDelayAPI"):
            v = get_attribute(prim, "newton:delaySteps")
            delay = 1 if v is None else v
            if isinstance(delay, float) and delay.is_integer():
                delay = int(delay)
            if not isinstance(delay, int) or isinstance(delay, bool) or delay < 0:
                raise USDImportError(f"delay must be an integer >= 0 [actuator steps], got {v!r}", path,
                                     "newton:delaySteps")  # fmt: skip
        clamping = []
        if has_applied_api_schema(prim, "NewtonMaxEffortClampingAPI"):
            clamping.append(("ClampingMaxEffort", {"max_effort": _float(prim, "newton:maxEffort", math.inf)}))
        if has_applied_api_schema(prim, "NewtonDCMotorClampingAPI"):
            clamping.append(("ClampingDCMotor", {
                "saturation_effort": _float(prim, "newton:saturationEffort", math.inf),
                "velocity_limit": _float(prim, "newton:velocityLimit", math.inf) * L,
                "max_motor_effort": _float(prim, "newton:maxMotorEffort", math.inf),
            }))  # fmt: skip
        if has_applied_api_schema(prim, "NewtonPositionBasedClampingAPI"):
            positions = [x * L for x in _floats(prim, "newton:lookupPositions", [])]
            clamping.append(("ClampingPositionBased", {
                "lookup_positions": positions, "lookup_efforts": _floats(prim, "newton:lookupEfforts", []),
            }))  # fmt: skip
        self._add(prim, controller, dof, coord, clamping, delay, args)

    def _neural(self, prim) -> tuple[str, dict]:
        path = str(prim.GetPath())
        attr = prim.GetAttribute("newton:modelPath")
        v = attr.Get() if attr and attr.HasAuthoredValue() else None
        raw = getattr(v, "path", v) if v is not None else None
        if not raw:
            raise USDImportError("NewtonNeuralControlAPI needs an authored model path", path, "newton:modelPath")
        model_path = getattr(v, "resolvedPath", "") or str(raw)
        if not os.path.isabs(model_path):
            try:  # anchor a relative path at the layer that authored it
                from pxr import Sdf

                layer = attr.GetPropertyStack()[0].layer
                if not layer.anonymous:
                    model_path = Sdf.ComputeAssetPathRelativeToLayer(layer, str(raw))
            except Exception:
                pass
        suffix = os.path.splitext(model_path)[1].lower()
        if suffix in _TORCH_SUFFIXES:
            raise USDImportError(
                f"Torch checkpoint {model_path!r}: armillary imports neural actuators from ONNX (.onnx) checkpoints "
                "only (add_usd has no allow_unsafe_torch_checkpoints); export the network to ONNX", path,
                "newton:modelPath",
            )  # fmt: skip
        if suffix != ".onnx":
            raise USDImportError(f"unsupported checkpoint {model_path!r}; expected an .onnx file", path,
                                 "newton:modelPath")  # fmt: skip
        kind = _onnx_model_type(model_path, path)
        if kind == "mlp":
            return "ControllerNeuralMLP", {"model_path": model_path}
        if kind == "lstm":
            return "ControllerNeuralLSTM", {"model_path": model_path}
        raise USDImportError(
            f"checkpoint {model_path!r} has model_type {kind!r}; armillary supports 'mlp' and 'lstm'", path,
            "newton:modelPath",
        )  # fmt: skip

    # -------------------------------------------------------------- MjcActuator
    def mjc_actuator(self, prim) -> None:
        from pxr import UsdPhysics

        path = str(prim.GetPath())
        tprim, tpath = self._target(prim, "mjc:target")
        ttype = tprim.GetTypeName()
        if ttype not in _JOINT_TYPES:
            if tprim.IsA(UsdPhysics.Joint):
                what = f"{ttype} (multi-DOF) joints"
            elif tprim.HasAPI(UsdPhysics.RigidBodyAPI):
                what = "bodies (body transmissions)"
            elif has_applied_api_schema(tprim, "MjcSiteAPI") or has_applied_api_schema(tprim, "NewtonSiteAPI"):
                what = "sites (site transmissions)"
            else:
                raise USDImportError(f"actuator target {tpath!r} is a {ttype or 'typeless prim'}, not a joint, body or "
                                     "site", path, "mjc:target")  # fmt: skip
            self.imp.warn(path, "mjc:target", f"actuators on {what} are not supported; {tpath!r} skipped")
            return
        gain_type = _token(prim, "mjc:gainType", "fixed")
        bias_type = _token(prim, "mjc:biasType", "none")
        gain = _floats(prim, "mjc:gainPrm", [1.0]) or [0.0]
        bias = (_floats(prim, "mjc:biasPrm", [0.0, 0.0, 0.0]) + [0.0, 0.0, 0.0])[:3]
        gear = (_floats(prim, "mjc:gear", [1.0]) or [1.0])[0]
        if _token(prim, "mjc:dynType", "none") != "none":
            self.imp.warn(path, "mjc:dynType", "activation dynamics are not supported; treated as direct")
        g0 = gain[0]
        close = (lambda x, y: abs(x - y) <= 1e-12 * max(1.0, abs(y)))  # noqa: E731
        form = None
        kp = kv = const = 0.0
        if gain_type == "fixed" and bias_type == "none":
            form = "effort"
        elif gain_type == "fixed" and bias_type == "affine" and close(bias[1], -g0):
            form, kp, kv, const = "position", g0, -bias[2], bias[0]
        elif gain_type == "fixed" and bias_type == "affine" and bias[1] == 0.0 and close(bias[2], -g0):
            form, kv, const = "velocity", g0, bias[0]
        if form is None:
            self.imp.warn(path, None, f"MjcActuator (gainType={gain_type}, biasType={bias_type}) has no "
                          "ControllerPD equivalent; skipped")  # fmt: skip
            return
        if kp < 0.0 or kv < 0.0:
            self.imp.warn(path, None, f"MjcActuator with a negative gain (kp={kp}, kv={kv}) has no ControllerPD "
                          "equivalent; skipped")  # fmt: skip
            return
        if not self._plugin_available(path):
            return
        where = self._dof(prim, tprim, tpath)
        if where is None:
            return
        dof, coord, linear = where
        L = self.lu if linear else 1.0
        g2 = gear * gear / L
        args = {"kp": kp * g2 if form == "position" else 0.0, "kd": kv * g2 if form != "effort" else 0.0,
                "const_effort": gear * const}  # fmt: skip
        limits = []
        lim = self._range(prim, "force")
        if lim is not None:
            limits.append(lim * abs(gear))
        if form == "effort":
            lim = self._range(prim, "ctrl")
            if lim is not None:
                limits.append(lim * abs(gear * g0))
        clamping = [("ClampingMaxEffort", {"max_effort": min(limits)})] if limits and math.isfinite(min(limits)) else []
        self._add(prim, "ControllerPD", dof, coord, clamping, None, args)

    def _range(self, prim, kind: str) -> float | None:
        """Largest magnitude of ``mjc:<kind>Range`` when limited (``true``, or ``auto`` with a range authored)."""
        limited = _token(prim, f"mjc:{kind}Limited", "auto").lower()
        lo_name, hi_name = f"mjc:{kind}Range:min", f"mjc:{kind}Range:max"
        authored = get_attribute(prim, lo_name) is not None or get_attribute(prim, hi_name) is not None
        if limited == "false" or (limited == "auto" and not authored):
            return None
        lo, hi = _float(prim, lo_name, 0.0), _float(prim, hi_name, 0.0)
        if lo != -hi:
            self.imp.warn(str(prim.GetPath()), f"mjc:{kind}Range", "an asymmetric range is imported as the symmetric "
                          "limit +-max(|min|, |max|)")  # fmt: skip
        return max(abs(lo), abs(hi))


def _onnx_model_type(model_path: str, prim_path: str) -> str:
    """The ``model_type`` entry of an ONNX checkpoint's metadata (``metadata_props``, or its ``metadata`` JSON)."""
    try:
        import onnx
    except ImportError:
        raise USDImportError(f"reading {model_path!r} needs the onnx package (pip install onnx)", prim_path,
                             "newton:modelPath") from None  # fmt: skip
    if not os.path.isfile(model_path):
        raise USDImportError(f"checkpoint {model_path!r} does not exist", prim_path, "newton:modelPath")
    try:
        model = onnx.load(model_path, load_external_data=False)
    except Exception as exc:
        raise USDImportError(f"{model_path!r} is not a readable ONNX model: {exc}", prim_path,
                             "newton:modelPath") from None  # fmt: skip
    meta = {}
    for prop in model.metadata_props:
        try:
            meta[prop.key] = json.loads(prop.value)
        except json.JSONDecodeError:
            meta[prop.key] = prop.value
    blob = meta.pop("metadata", None)
    if isinstance(blob, dict):
        meta.update(blob)
    kind = meta.get("model_type")
    if kind is None:
        raise USDImportError(f"checkpoint {model_path!r} has no 'model_type' in its metadata ('mlp' or 'lstm')",
                             prim_path, "newton:modelPath")  # fmt: skip
    return str(kind)


def import_actuators(imp) -> int:
    """Add the stage's actuator prims to ``imp.s`` (the importer's scratch builder); returns how many.

    Called after the joints are final in the scratch builder (after ``collapse_fixed_joints``); the
    entries move with the scratch builder into the target builder (``add_builder`` shifts their DOFs).
    """
    from pxr import Usd

    work = _ActuatorImport(imp)
    mjc = bool(imp.opts.get("actuator_components", False))
    it = iter(Usd.PrimRange(imp.root, Usd.TraverseInstanceProxies()))
    for prim in it:
        path = str(prim.GetPath())
        if imp.ignored(path) or not prim.IsActive():
            it.PruneChildren()
            continue
        tname = prim.GetTypeName()
        if tname == NEWTON_ACTUATOR:
            imp.current_path = path
            work.newton_actuator(prim)
        elif tname == MJC_ACTUATOR and mjc:
            imp.current_path = path
            work.mjc_actuator(prim)
    imp.current_path = None
    return work.count
