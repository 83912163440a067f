"""MuJoCo's MJCF schema: the elements, their attributes and value formats, and a validation pass.

The table lists every element MuJoCo's XML parser accepts (MuJoCo 4.0's schema, as ``mj_printSchema``
prints it, plus ``<frame>`` and ``<replicate>``, which MuJoCo's parser handles by itself) by its
path below ``<mujoco>`` (``<worldbody>`` and ``<body>`` share ``mujoco/body``), how often it may appear
in its parent (``!`` once, ``?`` at most once, ``*`` any number, ``R`` any number, nested in itself)
and its attributes, each with its value format:

* ``s`` any string; ``b`` ``true`` or ``false``; ``k:a|b`` one of the keywords (case-sensitive);
  ``k`` a keyword of a set not listed here (any non-empty value);
* ``f`` / ``i`` one number / integer (32-bit); ``f3`` up to 3; ``f3!`` exactly 3; ``f*`` any count;
* a leading ``!``: the attribute is required.

Numbers are C ``strtod`` numbers (``inf`` and hexadecimal floats included; no commas; a decimal number
that overflows a double is an error; NaN is rejected too, where MuJoCo only warns); integers are decimal. The value formats were
read off MuJoCo's parser as a black box (which values it rejects as "bad format", "invalid keyword",
"too much data" or "not enough data"); ``tests/test_strictness.py`` compares the element and
attribute names with the installed MuJoCo's ``mj_printSchema``.
"""

from __future__ import annotations

import math
import re

# path multiplicity attribute=format ... (continuation lines are indented)
_TABLE = """
mujoco ! model=s
mujoco/compiler * alignfree=b angle=k:radian|degree assetdir=s autolimits=b balanceinertia=b boundinertia=f
    boundmass=f conflict=k coordinate=k:local|global discardvisual=b eulerseq=s fitaabb=b fusestatic=b
    inertiafromgeom=k:false|true|auto inertiagrouprange=i2! meshdir=s passthrough=k savecanonical=b savecompiled=b
    saveinertial=b settotalmass=f strippath=b texturedir=s usethread=b
mujoco/compiler/lengthrange ? accel=f interval=f inttotal=f maxforce=f mode=k:none|muscle|all timeconst=f timestep=f
    tolrange=f useexisting=b uselimit=b
mujoco/option * actuatorgroupdisable=i* ccd_iterations=i ccd_tolerance=f cone=k:pyramidal|elliptic density=f
    gravity=f3! impratio=f integrator=k:Euler|RK4|implicit|implicitfast iterations=i jacobian=k:dense|sparse|auto
    ls_iterations=i ls_tolerance=f magnetic=f3! noslip_iterations=i noslip_tolerance=f o_friction=f5 o_margin=f
    o_solimp=f5 o_solref=f2 sdf_initpoints=i sdf_iterations=i sleep_tolerance=f solver=k:PGS|CG|Newton timestep=f
    tolerance=f viscosity=f wind=f3!
mujoco/option/flag ? actuation=k:disable|enable autoreset=k:disable|enable clampctrl=k:disable|enable
    constraint=k:disable|enable contact=k:disable|enable damper=k:disable|enable diagexact=k:disable|enable
    energy=k:disable|enable equality=k:disable|enable eulerdamp=k:disable|enable filterparent=k:disable|enable
    frictionloss=k:disable|enable fwdinv=k:disable|enable gravity=k:disable|enable invdiscrete=k:disable|enable
    ipc=k:disable|enable island=k:disable|enable limit=k:disable|enable midphase=k:disable|enable
    multiccd=k:disable|enable nativeccd=k:disable|enable override=k:disable|enable refsafe=k:disable|enable
    sensor=k:disable|enable sleep=k:disable|enable speculative=k:disable|enable spring=k:disable|enable
    warmstart=k:disable|enable
mujoco/size * memory=s nconmax=s njmax=s nkey=i nstack=s nuser_actuator=i nuser_body=i nuser_cam=i nuser_geom=i
    nuser_jnt=i nuser_sensor=i nuser_site=i nuser_tendon=i nuserdata=i
mujoco/statistic * center=f3! extent=f meaninertia=f meanmass=f meansize=f
mujoco/visual *
mujoco/visual/global ? azimuth=f bvactive=b cameraid=i elevation=f ellipsoidinertia=b fovy=f glow=f ipd=f linewidth=f
    offheight=i offwidth=i orthographic=b realtime=f
mujoco/visual/quality ? numquads=i numslices=i numstacks=i offsamples=i shadowsize=i
mujoco/visual/headlight ? active=s ambient=f3! diffuse=f3! specular=f3!
mujoco/visual/map ? actuatortendon=f alpha=f fogend=f fogstart=f force=f haze=f shadowclip=f shadowscale=f stiffness=f
    stiffnessrot=f torque=f zfar=f znear=f
mujoco/visual/scale ? actuatorlength=f actuatorwidth=f camera=f com=f connect=f constraint=f contactheight=f
    contactwidth=f forcewidth=f framelength=f framewidth=f frustum=f jointlength=f jointwidth=f light=f selectpoint=f
    slidercrank=f
mujoco/visual/rgba ? actuator=f4! actuatornegative=f4! actuatorpositive=f4! bv=f4! bvactive=f4! camera=f4! com=f4!
    connect=f4! constraint=f4! contactforce=f4! contactfriction=f4! contactgap=f4! contactpoint=f4! contacttorque=f4!
    crankbroken=f4! fog=f4! force=f4! frustum=f4! haze=f4! inertia=f4! joint=f4! light=f4! rangefinder=f4!
    selectpoint=f4! slidercrank=f4!
mujoco/default R class=s
mujoco/default/mesh ? inertia=k:convex|exact|legacy|shell maxhullvert=s scale=f3!
mujoco/default/texture ? builtin=k:none|gradient|checker|flat colorspace=k:auto|linear|sRGB embed=k:false|true|auto
    gridlayout=s gridsize=i2! height=i hflip=b mark=k:none|edge|cross|random markrgb=f3! nchannel=i random=f rgb1=f3!
    rgb2=f3! type=k:2d|cube|skybox vflip=b width=i
mujoco/default/material ? emission=f metallic=f reflectance=f rgba=f4! roughness=f shininess=f specular=f
    texrepeat=f2! texture=s texuniform=b
mujoco/default/material/layer * role=!s texture=s
mujoco/default/joint ? actuatorfrclimited=k:false|true|auto actuatorfrcrange=f2! actuatorgravcomp=b armature=f
    axis=f3! damping=f3 frictionloss=f group=i limited=k:false|true|auto margin=f pos=f3! range=f2! ref=f
    solimpfriction=f5 solimplimit=f5 solreffriction=f2 solreflimit=f2 springdamper=f2! springref=f springyield=f
    stiffness=f3 type=k:free|ball|slide|hinge user=f*
mujoco/default/geom ? adhesion=f axisangle=f4! castshadow=b conaffinity=i condim=i contype=i density=f euler=f3!
    fitscale=f fluidcoef=f5 fluidshape=k:none|ellipsoid friction=f3 fromto=f6! gap=f group=i hfield=s margin=f mass=f
    material=s mesh=s pos=f3! priority=i quat=f4! rgba=f4! shellinertia=b size=f3 solimp=f5 solmix=f solref=f2
    surfacevel=f6 type=k:plane|hfield|sphere|capsule|ellipsoid|cylinder|box|mesh|sdf user=f* xyaxes=f6! zaxis=f3!
mujoco/default/site ? axisangle=f4! euler=f3! fromto=f6! group=i material=s mesh=s pos=f3! quat=f4! rgba=f4! size=f3
    type=k:sphere|capsule|ellipsoid|cylinder|box user=f* xyaxes=f6! zaxis=f3!
mujoco/default/camera ? axisangle=f4! euler=f3! focal=f2! focalpixel=f2! fovy=f ipd=f
    mode=k:fixed|track|trackcom|targetbody|targetbodycom output=s pos=f3! principal=f2! principalpixel=f2!
    projection=k:perspective|orthographic quat=f4! resolution=i2! sensorsize=f2! user=f* xyaxes=f6! zaxis=f3!
mujoco/default/light ? active=b ambient=f3! attenuation=f3! bulbradius=f castshadow=b cutoff=f diffuse=f3! dir=f3!
    directional=b exponent=f intensity=f mode=k:fixed|track|trackcom|targetbody|targetbodycom pos=f3! range=f
    softness=f specular=f3! type=k:spot|directional|point|image
mujoco/default/pair ? adhesion=f condim=i friction=f5 gap=f margin=f solimp=f5 solref=f2 solreffriction=f2
mujoco/default/equality ? active=b solimp=f5 solref=f2
mujoco/default/tendon ? actuatorfrclimited=k:false|true|auto actuatorfrcrange=f2! armature=f damping=f3 frictionloss=f
    group=i limited=k:false|true|auto margin=f material=s range=f2! rgba=f4! solimpfriction=f5 solimplimit=f5
    solreffriction=f2 solreflimit=f2 springlength=f2 springyield=f stiffness=f3 user=f* width=f
mujoco/default/general ? actdim=i actearly=b actlimited=k:false|true|auto actrange=f2! armature=f biasprm=f10
    biastype=k:none|affine|muscle|user cranklength=f ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 delay=f
    dynprm=f10 dyntype=k:none|integrator|filter|filterexact|muscle|user ffrange=f2! forcelimited=k:false|true|auto
    forcerange=f2! gainprm=f10 gaintype=k:fixed|affine|muscle|user gear=f6 group=i inheritrange=f input=s
    interp=k:zoh|linear|cubic nsample=i user=f* velrange=f2!
mujoco/default/motor ? armature=f cranklength=f ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 delay=f
    forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i interp=k:zoh|linear|cubic nsample=i user=f*
mujoco/default/position ? armature=f cranklength=f ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 dampratio=f
    delay=f forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i inheritrange=f interp=k:zoh|linear|cubic
    kp=f kv=f nsample=i timeconst=f user=f*
mujoco/default/velocity ? armature=f cranklength=f ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 delay=f
    forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i interp=k:zoh|linear|cubic kv=f nsample=i user=f*
mujoco/default/intvelocity ? actlimited=k:false|true|auto actrange=f2! armature=f cranklength=f
    ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 dampratio=f delay=f forcelimited=k:false|true|auto
    forcerange=f2! gear=f6 group=i inheritrange=f interp=k:zoh|linear|cubic kp=f kv=f nsample=i user=f*
mujoco/default/orientation ? ctrlrange=f2! dampratio=f delay=f forcelimited=k:false|true|auto forcerange=f2! group=i
    input=s interp=k:zoh|linear|cubic kp=f kv=f nsample=i user=f*
mujoco/default/pid ? armature=f cranklength=f ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 dampratio=f
    delay=f ffrange=f2! forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i imax=f inheritrange=f input=s
    interp=k:zoh|linear|cubic ki=f kp=f kv=f nsample=i posrange=f2! slewmax=f user=f* velrange=f2!
mujoco/default/damper ? armature=f cranklength=f ctrlrange=f2! damping=f3 delay=f forcelimited=k:false|true|auto
    forcerange=f2! gear=f6 group=i interp=k:zoh|linear|cubic kv=f nsample=i user=f*
mujoco/default/cylinder ? area=f armature=f bias=f3! cranklength=f ctrllimited=k:false|true|auto ctrlrange=f2!
    damping=f3 delay=f diameter=f forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i
    interp=k:zoh|linear|cubic nsample=i timeconst=f user=f*
mujoco/default/muscle ? armature=f cranklength=f ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 delay=f
    force=f forcelimited=k:false|true|auto forcerange=f2! fpmax=f fvmax=f gear=f6 group=i interp=k:zoh|linear|cubic
    lmax=f lmin=f nsample=i range=f2! scale=f timeconst=f2! user=f* vmax=f
mujoco/default/adhesion ? ctrlrange=f2! delay=f forcelimited=k:false|true|auto forcerange=f2! gain=f group=i
    interp=k:zoh|linear|cubic nsample=i user=f*
mujoco/default/dcmotor ? armature=f cogging=f3 controller=f6 cranklength=f ctrllimited=k:false|true|auto ctrlrange=f2!
    damping=f3 delay=f gear=f6 group=i inductance=f2 input=k interp=k:zoh|linear|cubic lugre=f5 motorconst=f2
    nominal=f3 nsample=i resistance=f saturation=f3 thermal=f6 user=f*
mujoco/extension *
mujoco/extension/plugin * plugin=!s
mujoco/extension/plugin/instance * name=s
mujoco/extension/plugin/instance/config * key=s value=s
mujoco/asset *
mujoco/asset/mesh * builtin=k class=s content_type=s face=i* file=s inertia=k:convex|exact|legacy|shell material=s
    maxhullvert=s name=s normal=f* params=s refpos=f3! refquat=f4! scale=f3! smoothnormal=b texcoord=f* vertex=f*
mujoco/asset/mesh/plugin * instance=s plugin=s
mujoco/asset/mesh/plugin/config * key=!s value=!s
mujoco/asset/hfield * content_type=s elevation=s file=s name=s ncol=i nrow=i size=!f4!
mujoco/asset/skin * face=i* file=s group=s inflate=f material=s name=s rgba=f4! texcoord=f* vertex=f*
mujoco/asset/skin/bone * bindpos=!s bindquat=s body=!s vertid=s vertweight=s
mujoco/asset/texture * builtin=k:none|gradient|checker|flat class=s colorspace=k:auto|linear|sRGB content_type=s
    embed=k:false|true|auto file=s fileback=s filedown=s filefront=s fileleft=s fileright=s fileup=s gridlayout=s
    gridsize=i2! height=i hflip=b mark=k:none|edge|cross|random markrgb=f3! name=s nchannel=i random=f rgb1=f3!
    rgb2=f3! type=k:2d|cube|skybox vflip=b width=i
mujoco/asset/material * class=s emission=f metallic=f name=s reflectance=f rgba=f4! roughness=f shininess=f specular=f
    texrepeat=f2! texture=s texuniform=b
mujoco/asset/material/layer * role=!s texture=s
mujoco/asset/model * content_type=s file=s name=s
mujoco/body R axisangle=f4! childclass=s euler=f3! fuse=k gravcomp=f mocap=b name=s pos=f3! quat=f4! simple=k
    sleep=k:auto|never|allowed|init user=f* xyaxes=f6! zaxis=f3!
mujoco/body/inertial ? axisangle=s diaginertia=s euler=s fullinertia=s mass=s pos=!f3! quat=s xyaxes=s zaxis=s
mujoco/body/joint * actuatorfrclimited=k:false|true|auto actuatorfrcrange=f2! actuatorgravcomp=b armature=f axis=f3!
    class=s damping=f3 frictionloss=f group=i limited=k:false|true|auto margin=f name=s pos=f3! range=f2! ref=f
    solimpfriction=f5 solimplimit=f5 solreffriction=f2 solreflimit=f2 springdamper=f2! springref=f springyield=f
    stiffness=f3 type=k:free|ball|slide|hinge user=f*
mujoco/body/freejoint * align=k:false|true|auto group=s name=s
mujoco/body/geom * adhesion=f axisangle=f4! castshadow=b class=s conaffinity=i condim=i contype=i density=f euler=f3!
    fitscale=f fluidcoef=f5 fluidshape=k:none|ellipsoid friction=f3 fromto=f6! gap=f group=i hfield=s margin=f mass=f
    material=s mesh=s name=s pos=f3! priority=i quat=f4! rgba=f4! shellinertia=b size=f3 solimp=f5 solmix=f solref=f2
    surfacevel=f6 type=k:plane|hfield|sphere|capsule|ellipsoid|cylinder|box|mesh|sdf user=f* xyaxes=f6! zaxis=f3!
mujoco/body/geom/plugin * instance=s plugin=s
mujoco/body/geom/plugin/config * key=!s value=!s
mujoco/body/attach * body=s frame=s model=s prefix=!s
mujoco/body/site * axisangle=f4! class=s euler=f3! fromto=f6! group=i material=s mesh=s name=s pos=f3! quat=f4!
    rgba=f4! size=f3 type=k:sphere|capsule|ellipsoid|cylinder|box user=f* xyaxes=f6! zaxis=f3!
mujoco/body/camera * axisangle=f4! class=s euler=f3! focal=f2! focalpixel=f2! fovy=f ipd=f
    mode=k:fixed|track|trackcom|targetbody|targetbodycom name=s output=s pos=f3! principal=f2! principalpixel=f2!
    projection=k:perspective|orthographic quat=f4! resolution=i2! sensorsize=f2! target=s user=f* xyaxes=f6! zaxis=f3!
mujoco/body/light * active=b ambient=f3! attenuation=f3! bulbradius=f castshadow=b class=s cutoff=f diffuse=f3!
    dir=f3! directional=b exponent=f intensity=f mode=k:fixed|track|trackcom|targetbody|targetbodycom name=s pos=f3!
    range=f softness=f specular=f3! target=s texture=s type=k:spot|directional|point|image
mujoco/body/plugin * instance=s plugin=s
mujoco/body/plugin/config * key=!s value=!s
mujoco/body/flexcomp * axisangle=s cellcount=s count=s dim=s dof=s element=s euler=s file=s flatskin=s group=s
    inertiabox=s mass=s material=s mesh=s name=!s origin=s point=s pos=s quat=s radius=s rgba=s rigid=s scale=s
    spacing=s texcoord=s type=s xyaxes=s zaxis=s
mujoco/body/flexcomp/edge ? damping=s equality=s solimp=s solref=s stiffness=s
mujoco/body/flexcomp/elasticity ? damping=s elastic2d=s poisson=s section=s sectionsize=s shear=s thickness=s yield=s
    young=s
mujoco/body/flexcomp/contact ? activelayers=s conaffinity=s condim=s contype=s friction=s gap=s margin=s passive=s
    priority=s selfcollide=s solimp=s solmix=s solref=s
mujoco/body/flexcomp/pin * grid=s gridrange=s id=s range=s
mujoco/body/flexcomp/plugin * instance=s plugin=s
mujoco/body/flexcomp/plugin/config * key=s value=s
mujoco/deformable *
mujoco/deformable/flex * body=!s cellcount=s dim=i dof=s element=!s elemtexcoord=s flatskin=b group=i material=s
    name=s node=s nodecoord=s radius=f rgba=f4! texcoord=s vertex=s
mujoco/deformable/flex/contact ? activelayers=s conaffinity=s condim=s contype=s friction=s gap=s margin=s passive=s
    priority=s selfcollide=s solimp=s solmix=s solref=s
mujoco/deformable/flex/edge ? damping=s stiffness=s
mujoco/deformable/flex/elasticity ? damping=s elastic2d=s poisson=s section=s sectionsize=s shear=s thickness=s
    yield=s young=s
mujoco/deformable/skin * face=i* file=s group=s inflate=f material=s name=s rgba=f4! texcoord=f* vertex=f*
mujoco/deformable/skin/bone * bindpos=!s bindquat=s body=!s vertid=s vertweight=s
mujoco/contact *
mujoco/contact/pair * adhesion=f class=s condim=i friction=f5 gap=f geom1=s geom2=s margin=f name=s solimp=f5
    solref=f2 solreffriction=f2
mujoco/contact/exclude * body1=!s body2=!s name=s
mujoco/tendon *
mujoco/tendon/spatial * actuatorfrclimited=k:false|true|auto actuatorfrcrange=f2! armature=f class=s damping=f3
    frictionloss=f group=i limited=k:false|true|auto margin=f material=s name=s range=f2! rgba=f4! solimpfriction=f5
    solimplimit=f5 solreffriction=f2 solreflimit=f2 springlength=f2 springyield=f stiffness=f3 user=f* width=f
mujoco/tendon/spatial/site * site=!s
mujoco/tendon/spatial/geom * geom=!s sidesite=s
mujoco/tendon/spatial/pulley * divisor=!f
mujoco/tendon/fixed * actuatorfrclimited=k:false|true|auto actuatorfrcrange=f2! armature=f class=s damping=f3
    frictionloss=f group=i limited=k:false|true|auto margin=f name=s range=f2! solimpfriction=f5 solimplimit=f5
    solreffriction=f2 solreflimit=f2 springlength=f2 springyield=f stiffness=f3 user=f*
mujoco/tendon/fixed/joint * coef=!s joint=!s
mujoco/equality *
mujoco/equality/connect * active=s anchor=s body1=s body2=s class=s name=s site1=s site2=s solimp=s solref=s
mujoco/equality/weld * active=s anchor=s body1=s body2=s class=s name=s relpose=s site1=s site2=s solimp=s solref=s
    torquescale=s
mujoco/equality/joint * active=b class=s joint1=!s joint2=s name=s polycoef=s solimp=f5 solref=f2
mujoco/equality/tendon * active=b class=s name=s polycoef=s solimp=f5 solref=f2 tendon1=!s tendon2=s
mujoco/equality/flex * active=b class=s flex=!s name=s solimp=f5 solref=f2
mujoco/equality/flexstrain * active=b cell=s class=s flex=!s name=s solimp=f5 solref=f2
mujoco/actuator *
mujoco/actuator/general * actdim=i actearly=b actlimited=k:false|true|auto actrange=f2! armature=f biasprm=f10
    biastype=k:none|affine|muscle|user body=s class=s cranklength=f cranksite=s ctrllimited=k:false|true|auto
    ctrlrange=f2! damping=f3 delay=f dynprm=f10 dyntype=k:none|integrator|filter|filterexact|muscle|user ffrange=f2!
    forcelimited=k:false|true|auto forcerange=f2! gainprm=f10 gaintype=k:fixed|affine|muscle|user gear=f6 group=i
    inheritrange=f input=k interp=k:zoh|linear|cubic joint=s jointinparent=s lengthrange=f2! name=s nsample=i
    refsite=s site=s slidersite=s tendon=s user=f* velrange=f2!
mujoco/actuator/motor * armature=f class=s cranklength=f cranksite=s ctrllimited=k:false|true|auto ctrlrange=f2!
    damping=f3 delay=f forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i interp=k:zoh|linear|cubic joint=s
    jointinparent=s lengthrange=f2! name=s nsample=i refsite=s site=s slidersite=s tendon=s user=f*
mujoco/actuator/position * armature=f class=s cranklength=f cranksite=s ctrllimited=k:false|true|auto ctrlrange=f2!
    damping=f3 dampratio=f delay=f forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i inheritrange=f
    interp=k:zoh|linear|cubic joint=s jointinparent=s kp=f kv=f lengthrange=f2! name=s nsample=i refsite=s site=s
    slidersite=s tendon=s timeconst=f user=f*
mujoco/actuator/velocity * armature=f class=s cranklength=f cranksite=s ctrllimited=k:false|true|auto ctrlrange=f2!
    damping=f3 delay=f forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i interp=k:zoh|linear|cubic joint=s
    jointinparent=s kv=f lengthrange=f2! name=s nsample=i refsite=s site=s slidersite=s tendon=s user=f*
mujoco/actuator/intvelocity * actlimited=k:false|true|auto actrange=f2! armature=f class=s cranklength=f cranksite=s
    ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 dampratio=f delay=f forcelimited=k:false|true|auto
    forcerange=f2! gear=f6 group=i inheritrange=f interp=k:zoh|linear|cubic joint=s jointinparent=s kp=f kv=f
    lengthrange=f2! name=s nsample=i refsite=s site=s slidersite=s tendon=s user=f*
mujoco/actuator/orientation * class=s ctrlrange=f2! dampratio=f delay=f forcelimited=k:false|true|auto forcerange=f2!
    group=i input=k interp=k:zoh|linear|cubic joint=s kp=f kv=f name=s nsample=i refsite=s site=s user=f*
mujoco/actuator/pid * armature=f class=s cranklength=f cranksite=s ctrllimited=k:false|true|auto ctrlrange=f2!
    damping=f3 dampratio=f delay=f ffrange=f2! forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i imax=f
    inheritrange=f input=k interp=k:zoh|linear|cubic joint=s jointinparent=s ki=f kp=f kv=f lengthrange=f2! name=s
    nsample=i posrange=f2! refsite=s site=s slewmax=f slidersite=s tendon=s user=f* velrange=f2!
mujoco/actuator/damper * armature=f class=s cranklength=f cranksite=s ctrlrange=f2! damping=f3 delay=f
    forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i interp=k:zoh|linear|cubic joint=s jointinparent=s
    kv=f lengthrange=f2! name=s nsample=i refsite=s site=s slidersite=s tendon=s user=f*
mujoco/actuator/cylinder * area=f armature=f bias=f3! class=s cranklength=f cranksite=s ctrllimited=k:false|true|auto
    ctrlrange=f2! damping=f3 delay=f diameter=f forcelimited=k:false|true|auto forcerange=f2! gear=f6 group=i
    interp=k:zoh|linear|cubic joint=s jointinparent=s lengthrange=f2! name=s nsample=i refsite=s site=s slidersite=s
    tendon=s timeconst=f user=f*
mujoco/actuator/muscle * armature=f class=s cranklength=f cranksite=s ctrllimited=k:false|true|auto ctrlrange=f2!
    damping=f3 delay=f force=f forcelimited=k:false|true|auto forcerange=f2! fpmax=f fvmax=f gear=f6 group=i
    interp=k:zoh|linear|cubic joint=s jointinparent=s lengthrange=f2! lmax=f lmin=f name=s nsample=i range=f2! scale=f
    slidersite=s tausmooth=f tendon=s timeconst=f2! user=f* vmax=f
mujoco/actuator/adhesion * body=s class=s ctrlrange=f2! delay=f forcelimited=k:false|true|auto forcerange=f2! gain=f
    group=i interp=k:zoh|linear|cubic name=s nsample=i user=f*
mujoco/actuator/dcmotor * armature=f class=s cogging=f3 controller=f6 cranklength=f cranksite=s
    ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 delay=f gear=f6 group=i inductance=f2 input=k
    interp=k:zoh|linear|cubic joint=s jointinparent=s lengthrange=f2! lugre=f5 motorconst=f2 name=s nominal=f3
    nsample=i refsite=s resistance=f saturation=f3 site=s slidersite=s tendon=s thermal=f6 user=f*
mujoco/actuator/plugin * actdim=i actearly=b actlimited=k:false|true|auto actrange=f2! armature=f class=s
    cranklength=f cranksite=s ctrllimited=k:false|true|auto ctrlrange=f2! damping=f3 delay=f dynprm=f10
    dyntype=k:none|integrator|filter|filterexact|muscle|user forcelimited=k:false|true|auto forcerange=f2! gear=f6
    group=i instance=s interp=k:zoh|linear|cubic joint=s jointinparent=s lengthrange=f2! name=s nsample=i plugin=s
    site=s slidersite=s tendon=s user=f*
mujoco/actuator/plugin/config * key=!s value=!s
mujoco/sensor *
mujoco/sensor/touch * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i site=!s user=f*
mujoco/sensor/accelerometer * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i site=!s
    user=f*
mujoco/sensor/velocimeter * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i site=!s
    user=f*
mujoco/sensor/gyro * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i site=!s user=f*
mujoco/sensor/force * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i site=!s user=f*
mujoco/sensor/torque * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i site=!s user=f*
mujoco/sensor/magnetometer * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i site=!s
    user=f*
mujoco/sensor/camprojection * camera=!s cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f
    nsample=i site=!s user=f*
mujoco/sensor/rangefinder * camera=s cutoff=s data=s delay=s interp=s interval=s name=s noise=s nsample=s site=s
    user=s
mujoco/sensor/jointpos * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 joint=!s name=s noise=f nsample=i
    user=f*
mujoco/sensor/jointvel * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 joint=!s name=s noise=f nsample=i
    user=f*
mujoco/sensor/tendonpos * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i tendon=!s
    user=f*
mujoco/sensor/tendonvel * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i tendon=!s
    user=f*
mujoco/sensor/actuatorpos * actuator=!s cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f
    nsample=i user=f*
mujoco/sensor/actuatorvel * actuator=!s cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f
    nsample=i user=f*
mujoco/sensor/actuatorfrc * actuator=!s cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f
    nsample=i user=f*
mujoco/sensor/jointactuatorfrc * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 joint=!s name=s noise=f
    nsample=i user=f*
mujoco/sensor/tendonactuatorfrc * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i
    tendon=!s user=f*
mujoco/sensor/ballquat * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 joint=!s name=s noise=f nsample=i
    user=f*
mujoco/sensor/ballangvel * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 joint=!s name=s noise=f nsample=i
    user=f*
mujoco/sensor/jointlimitpos * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 joint=!s name=s noise=f nsample=i
    user=f*
mujoco/sensor/jointlimitvel * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 joint=!s name=s noise=f nsample=i
    user=f*
mujoco/sensor/jointlimitfrc * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 joint=!s name=s noise=f nsample=i
    user=f*
mujoco/sensor/tendonlimitpos * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i
    tendon=!s user=f*
mujoco/sensor/tendonlimitvel * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i
    tendon=!s user=f*
mujoco/sensor/tendonlimitfrc * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i
    tendon=!s user=f*
mujoco/sensor/framepos * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera refname=s reftype=s user=f*
mujoco/sensor/framequat * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera refname=s reftype=s user=f*
mujoco/sensor/framexaxis * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera refname=s reftype=s user=f*
mujoco/sensor/frameyaxis * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera refname=s reftype=s user=f*
mujoco/sensor/framezaxis * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera refname=s reftype=s user=f*
mujoco/sensor/framelinvel * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera refname=s reftype=s user=f*
mujoco/sensor/frameangvel * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera refname=s reftype=s user=f*
mujoco/sensor/framelinacc * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera user=f*
mujoco/sensor/frameangacc * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i objname=s
    objtype=!k:body|xbody|geom|site|camera user=f*
mujoco/sensor/subtreecom * body=!s cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i
    user=f*
mujoco/sensor/subtreelinvel * body=!s cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i
    user=f*
mujoco/sensor/subtreeangmom * body=!s cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i
    user=f*
mujoco/sensor/insidesite * cutoff=f delay=f enclosed=s interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i
    objname=s objtype=!s site=!s user=f*
mujoco/sensor/distance * body1=s body2=s cutoff=s delay=s geom1=s geom2=s interp=s interval=s name=s noise=s nsample=s
    user=s
mujoco/sensor/normal * body1=s body2=s cutoff=s delay=s geom1=s geom2=s interp=s interval=s name=s noise=s nsample=s
    user=s
mujoco/sensor/fromto * body1=s body2=s cutoff=s delay=s geom1=s geom2=s interp=s interval=s name=s noise=s nsample=s
    user=s
mujoco/sensor/contact * body1=s body2=s cutoff=f data=s delay=f geom1=s geom2=s interp=k:zoh|linear|cubic interval=f2
    name=s noise=f nsample=i num=s reduce=k:none|mindist|maxforce|netforce site=s subtree1=s subtree2=s user=f*
mujoco/sensor/e_potential * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i user=f*
mujoco/sensor/e_kinetic * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i user=f*
mujoco/sensor/clock * cutoff=f delay=f interp=k:zoh|linear|cubic interval=f2 name=s noise=f nsample=i user=f*
mujoco/sensor/tactile * cutoff=f delay=f geom=!s interp=k:zoh|linear|cubic interval=f2 mesh=!s name=s nsample=i
    user=f*
mujoco/sensor/user * cutoff=f datatype=s dim=!s name=s needstage=s noise=f objname=s objtype=s user=f*
mujoco/sensor/plugin * cutoff=f instance=s name=s objname=s objtype=s plugin=s refname=s reftype=s user=f*
mujoco/sensor/plugin/config * key=!s value=!s
mujoco/custom *
mujoco/custom/numeric * data=s name=!s size=s
mujoco/custom/text * data=s name=!s
mujoco/custom/tuple * name=!s
mujoco/custom/tuple/element * objname=s objtype=s prm=s
mujoco/keyframe *
mujoco/keyframe/key * act=f* ctrl=f* mpos=f* mquat=f* name=s plastic=f* qpos=f* qvel=f* time=f
mujoco/body/frame * name=s childclass=s pos=f3! quat=f4! axisangle=f4! xyaxes=f6! zaxis=f3! euler=f3!
mujoco/body/replicate * count=i offset=f3! euler=f3! sep=s
"""


# ---------------------------------------------------------------------------------------------- engine
class _Node:
    __slots__ = ("path", "tag", "unique", "attrs", "children")

    def __init__(self, path, mult, attrs):
        self.path, self.unique, self.attrs = path, mult == "?", attrs
        self.tag = path.rsplit("/", 1)[-1]
        self.children: dict[str, _Node] = {}


def _parse_table() -> dict[str, _Node]:
    nodes: dict[str, _Node] = {}
    entries: list[list[str]] = []
    for line in _TABLE.splitlines():
        if not line.strip():
            continue
        if line[0].isspace():
            entries[-1].extend(line.split())
        else:
            entries.append(line.split())
    for path, mult, *attrs in entries:
        nodes[path] = _Node(path, mult, dict(a.split("=", 1) for a in attrs))
    for path, node in nodes.items():
        if "/" in path:
            parent = nodes[path.rsplit("/", 1)[0]]
            parent.children[node.tag] = node
    body, default = nodes["mujoco/body"], nodes["mujoco/default"]
    default.children["default"] = default
    for n in (body, nodes["mujoco/body/frame"], nodes["mujoco/body/replicate"]):
        n.children.update({"body": body, "frame": nodes["mujoco/body/frame"], "replicate": nodes["mujoco/body/replicate"]})
        if n is not body:
            n.children.update({k: v for k, v in body.children.items() if k not in n.children})
    nodes["mujoco"].children["worldbody"] = body
    return nodes


_NODES = _parse_table()

_INT = re.compile(r"[+-]?\d+\Z")
_FLOAT = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan"
                    r"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?)\Z", re.IGNORECASE)  # fmt: skip


def _number(tok: str, kind: str):
    """The value of one token, or an error text."""
    if kind == "i":
        if not _INT.match(tok):
            return None, "is not an integer"
        v = int(tok)
        if not -(2**31) <= v < 2**31:
            return None, "is out of the 32-bit integer range"
        return v, None
    if not _FLOAT.match(tok):
        return None, "is not a number"
    if tok.lower().lstrip("+-").startswith("0x"):
        v = float.fromhex(tok)
    else:
        v = float(tok)
    if math.isinf(v) and "inf" not in tok.lower():
        return None, "is too large (overflows a double)"
    if math.isnan(v):  # MuJoCo only warns; a NaN never means anything in a model (and can hang its compiler)
        return None, "is NaN"
    return v, None


def check_value(spec: str, raw: str) -> str | None:
    """None when ``raw`` has the format ``spec`` (see the table's legend), else what is wrong."""
    spec = spec.lstrip("!")
    if spec == "s":
        return None
    if spec in ("b", "k") or spec.startswith("k:"):
        allowed = ("false", "true") if spec == "b" else tuple(spec[2:].split("|")) if spec.startswith("k:") else None
        if allowed is None:
            return None if raw.strip() else "must not be empty"
        return None if raw in allowed else "is not a keyword of this attribute"
    kind, rest = spec[0], spec[1:]
    exact = rest.endswith("!")
    rest = rest.rstrip("!")
    n = None if rest == "*" else int(rest or 1)
    toks = raw.split()
    what = "integer" if kind == "i" else "number"
    for t in toks:
        _, e = _number(t, kind)
        if e:
            return (f"{t!r} {e}" if len(toks) > 1 else e) + f"; expected {describe(spec)}"
    if n is not None and len(toks) > n:
        return f"needs {'at most ' if n > 1 else ''}{n} {what}{'s' if n > 1 else ''}, got {len(toks)}"
    if exact and toks and len(toks) < n:
        return f"needs {n} {what}s, got {len(toks)}"
    return None


def describe(spec: str) -> str:
    """Human-readable format of ``spec``."""
    spec = spec.lstrip("!")
    if spec == "s":
        return "a string"
    if spec == "b":
        return "true or false"
    if spec.startswith("k"):
        return "one of " + ", ".join(spec[2:].split("|")) if spec.startswith("k:") else "a keyword"
    kind = "integer" if spec[0] == "i" else "number"
    rest = spec[1:].rstrip("!")
    if rest == "*":
        return f"a list of {kind}s"
    n = int(rest or 1)
    if n == 1:
        return f"one {kind}"
    return f"{'exactly' if spec.endswith('!') else 'up to'} {n} {kind}s"


# elements that take one of several groups of attributes: (groups, the attributes that must be given
# from each group); MuJoCo: a connect is given by two sites or by body1 and an anchor, a weld by two
# sites or by body1
_EXCLUSIVE = {
    "mujoco/equality/connect": ((("site1", "site2"), ("body1", "body2", "anchor")), (("site1", "site2"), ("body1", "anchor"))),
    "mujoco/equality/weld": ((("site1", "site2"), ("body1", "body2", "anchor", "relpose")), (("site1", "site2"), ("body1",))),
}  # fmt: skip


def _check_exclusive(el, rule, error) -> None:
    groups, needed = rule
    used = [i for i, g in enumerate(groups) if any(k in el.attrib for k in g)]
    if len(used) > 1:
        raise error(el, f"give either {' and '.join(groups[0])} or {', '.join(groups[1])}, not both "
                        f"(got {', '.join(k for g in groups for k in g if k in el.attrib)})")  # fmt: skip
    if not used or any(k not in el.attrib for k in needed[used[0]]):
        raise error(el, f"needs {' and '.join(needed[0])}, or {' and '.join(needed[1])}")


def validate(root, loc, extra: dict | None = None) -> None:
    """Check every element below ``root`` (the ``<include>``-expanded ``<mujoco>``) against MuJoCo's schema:
    known elements in their place, unique elements at most once, known attributes, value formats.

    ``extra``: tag -> attribute names accepted on top of the schema (registered custom attributes)."""
    extra = extra or {}
    error = loc.error

    def where(in_default):
        return f"in <default class={in_default!r}>: " if in_default else ""

    def visit(el, node, in_default):
        attrs = node.attrs
        for key, raw in el.attrib.items():
            spec = attrs.get(key)
            if spec is None and key in extra.get(el.tag, ()):
                continue
            if spec is None:
                raise error(el, f"{where(in_default)}unknown attribute {key!r}; <{el.tag}> accepts: "
                                f"{', '.join(sorted(attrs)) or 'no attributes'}")  # fmt: skip
            msg = check_value(spec, raw)
            if msg and spec.lstrip("!")[0] in "bk":
                raise error(el, f"{where(in_default)}unknown {el.tag} {key} {raw!r}; expected {describe(spec)}"
                                f"{' (case-sensitive)' if raw.strip() else ''}")  # fmt: skip
            if msg:
                raise error(el, f"{where(in_default)}attribute {key}={raw!r} {msg}")
        for key, spec in attrs.items():
            if spec.startswith("!") and key not in el.attrib:
                raise error(el, f"{where(in_default)}required attribute {key!r} is missing")
        rule = _EXCLUSIVE.get(node.path)
        if rule is not None:
            _check_exclusive(el, rule, error)
        seen: dict[str, int] = {}
        for c in el:
            if not isinstance(c.tag, str):
                continue
            child = node.children.get(c.tag)
            if child is None:
                allowed = ", ".join(f"<{t}>" for t in sorted(node.children)) or "no child elements"
                raise error(c, f"{where(in_default)}<{c.tag}> is not an MJCF element allowed inside <{el.tag}> "
                               f"(allowed: {allowed})")  # fmt: skip
            if child.unique:
                seen[c.tag] = seen.get(c.tag, 0) + 1
                if seen[c.tag] > 1:
                    raise error(c, f"{where(in_default)}<{c.tag}> appears more than once in <{el.tag}>; "
                                   "at most one is allowed")  # fmt: skip
            cls = in_default
            if c.tag == "default":
                cls = c.get("class", "main")
            visit(c, child, cls)

    visit(root, _NODES["mujoco"], None)
