from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('models_app', '0012_ranker_feature_set_and_fit_claim'),
    ]

    operations = [
        migrations.AddField(
            model_name='trainingrun',
            name='eta_report',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
