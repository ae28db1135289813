from django.apps import AppConfig


class GpuprofilesConfig(AppConfig):
    name = "gpuprofiles"
    verbose_name = "Model and GPU catalog"
